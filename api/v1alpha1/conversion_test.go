package v1alpha1_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/randomobjects"
)

// The namespace scopes, custom versions and labels a round trip must keep, each with the others
// and with every other field filled at random.
var (
	selectors = []*metav1.LabelSelector{
		nil,
		{},
		v1beta1.NamespaceNamed("shop"),
		v1beta1.NamespaceNamed("other"),
		{MatchLabels: map[string]string{v1beta1.NamespaceNameLabel: "shop", "env": "prod"}},
		{MatchLabels: map[string]string{v1beta1.NamespaceNameLabel: "shop"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpExists}}},
		{MatchLabels: map[string]string{"env": "prod"}},
	}
	versions = []*string{nil, ptr.To(""), ptr.To("v1"), ptr.To("v2")}
)

// fill returns a SidecarSet filled at random, with no TypeMeta (conversion does not set it) and
// without the custom-version label and the conversion's annotations, which the cases set.
func fill[T any, PT interface {
	*T
	metav1.Object
}](f *randfill.Filler) PT {
	obj := PT(new(T))
	f.Fill(obj)
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	delete(labels, v1alpha1.SidecarSetCustomVersionLabel)
	delete(annotations, v1alpha1.V1alpha1FieldsAnnotation)
	delete(annotations, v1alpha1.V1beta1FieldsAnnotation)
	return obj
}

// setLabel sets the custom-version label to *v, none when v is nil.
func setLabel(m *metav1.ObjectMeta, v *string) {
	if v != nil {
		metav1.SetMetaDataLabel(m, v1alpha1.SidecarSetCustomVersionLabel, *v)
	}
}

// setAnnotation sets key to v, none when v is empty.
func setAnnotation(m *metav1.ObjectMeta, key, v string) {
	if v != "" {
		metav1.SetMetaDataAnnotation(m, key, v)
	}
}

// v1beta1 → v1alpha1 → v1beta1 is the identity, spec, labels and annotations included: a
// v1alpha1 client that reads a SidecarSet and replaces it changing nothing else changes nothing.
// The cases are every combination of the custom-version label (absent, empty, equal to
// spec.customVersion or not), spec.customVersion, namespaceSelectors that are or are not the one
// a spec.namespace becomes, and V1alpha1FieldsAnnotation as the conversion writes it, as a v1beta1
// client's later change of the spec leaves it, or as written by hand.
func TestBetaAlphaBetaIsTheIdentity(t *testing.T) {
	f := randomobjects.Filler(t, 1)
	fields := []string{
		"",
		`{"namespace":"shop"}`,
		`{"namespace":"shop","namespaceSelector":{"matchLabels":{"env":"prod"}}}`,
		`{"namespace":"shop","customVersionLabel":""}`,
		`{"customVersionLabel":""}`,
		`{"namespaceSelector":{"matchLabels":{"env":"prod"}}}`,
		`{}`,
		`{"namespace": "shop"}`,
		`not json`,
		`{"namespace":"shop","namespaceSelector":{"matchExpressions":[{"key":"env","operator":"In"}]}}`,
	}
	n := 0
	for _, label := range versions {
		for _, customVersion := range []string{"", "v1", "v2", "not a label value!"} {
			for _, selector := range selectors {
				for _, kept := range fields {
					beta := fill[v1beta1.SidecarSet](f)
					setLabel(&beta.ObjectMeta, label)
					beta.Spec.CustomVersion = customVersion
					beta.Spec.NamespaceSelector = selector.DeepCopy()
					setAnnotation(&beta.ObjectMeta, v1alpha1.V1alpha1FieldsAnnotation, kept)

					var alpha v1alpha1.SidecarSet
					require.NoError(t, alpha.ConvertFrom(beta))
					if v, ok := alpha.Labels[v1alpha1.SidecarSetCustomVersionLabel]; ok {
						require.Empty(t, validation.IsValidLabelValue(v), "customVersion %q: the API server would refuse the converted object", customVersion)
					}
					var back v1beta1.SidecarSet
					require.NoError(t, alpha.ConvertTo(&back))
					require.True(t, apiequality.Semantic.DeepEqual(beta, &back),
						"label %q, customVersion %q, selector %v, annotation %q: the round trip changed the object:\n%s",
						ptr.Deref(label, "<none>"), customVersion, selector, kept, diff.Diff(beta, &back))
					n++
				}
			}
		}
	}
	require.Equal(t, 4*4*7*10, n)
}

// v1alpha1 → v1beta1 → v1alpha1 is the identity too: every combination of spec.namespace,
// namespaceSelectors that are or are not the one it becomes, the custom-version label (absent,
// empty or set) and V1beta1FieldsAnnotation (the v1beta1 object's own label, as the conversion
// writes it). V1alpha1FieldsAnnotation on a v1alpha1 object, as a v1beta1 client's change leaves
// it, is TestBetaAlphaBetaIsTheIdentity's: it comes from there.
func TestAlphaBetaAlphaIsTheIdentity(t *testing.T) {
	f := randomobjects.Filler(t, 2)
	n := 0
	for _, namespace := range []string{"", "shop"} {
		for _, selector := range selectors {
			for _, label := range versions {
				for _, own := range versions {
					alpha := fill[v1alpha1.SidecarSet](f)
					alpha.Spec.Namespace = namespace
					alpha.Spec.NamespaceSelector = selector.DeepCopy()
					setLabel(&alpha.ObjectMeta, label)
					if own != nil {
						setAnnotation(&alpha.ObjectMeta, v1alpha1.V1beta1FieldsAnnotation, fmt.Sprintf(`{"customVersionLabel":%q}`, *own))
					}

					var beta v1beta1.SidecarSet
					require.NoError(t, alpha.ConvertTo(&beta))
					var back v1alpha1.SidecarSet
					require.NoError(t, back.ConvertFrom(&beta))
					require.True(t, apiequality.Semantic.DeepEqual(alpha, &back),
						"namespace %q, selector %v, label %q, own label %q: the round trip changed the object:\n%s",
						namespace, selector, ptr.Deref(label, "<none>"), ptr.Deref(own, "<none>"), diff.Diff(alpha, &back))
					n++
				}
			}
		}
	}
	require.Equal(t, 2*7*4*4, n)
}

// What each version reads: OpenKruise's conversion where it loses nothing, and the fields the
// other version has no place for in the conversion's annotations, never in its spec or labels.
func TestConvertFrom(t *testing.T) {
	named := v1beta1.NamespaceNamed("shop")
	prod := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	tests := []struct {
		name          string
		labels        map[string]string
		annotations   map[string]string
		customVersion string
		selector      *metav1.LabelSelector
		want          v1alpha1.SidecarSet
	}{
		{
			name:   "the custom-version label alone is no custom version: v1alpha1 reads none, and the label rides in the annotation",
			labels: map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v1"},
			want: v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{},
				Annotations: map[string]string{v1alpha1.V1beta1FieldsAnnotation: `{"customVersionLabel":"v1"}`}}},
		},
		{
			name:          "spec.customVersion becomes the label",
			customVersion: "v2",
			want:          v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v2"}}},
		},
		{
			name:          "a label other than spec.customVersion: v1alpha1 reads spec.customVersion",
			labels:        map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v1"},
			customVersion: "v2",
			want: v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v2"},
				Annotations: map[string]string{v1alpha1.V1beta1FieldsAnnotation: `{"customVersionLabel":"v1"}`}}},
		},
		{
			name:     "a namespaceSelector on the name label stays one, as OpenKruise converts",
			selector: named,
			want:     v1alpha1.SidecarSet{Spec: v1alpha1.SidecarSetSpec{NamespaceSelector: named}},
		},
		{
			name:        "spec.namespace comes back from the annotation, with the selector written beside it",
			selector:    named,
			annotations: map[string]string{v1alpha1.V1alpha1FieldsAnnotation: `{"namespace":"shop","namespaceSelector":{"matchLabels":{"env":"prod"}}}`},
			want:        v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}, Spec: v1alpha1.SidecarSetSpec{Namespace: "shop", NamespaceSelector: prod}},
		},
		{
			name:        "an annotation the spec has moved away from is no spec.namespace, and stays",
			selector:    prod,
			annotations: map[string]string{v1alpha1.V1alpha1FieldsAnnotation: `{"namespace":"shop"}`},
			want: v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.V1alpha1FieldsAnnotation: `{"namespace":"shop"}`}},
				Spec: v1alpha1.SidecarSetSpec{NamespaceSelector: prod}},
		},
		{
			name:          "a spec.customVersion that is no label value rides in the annotation, not the label",
			labels:        map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v1"},
			customVersion: "not a label value!",
			want: v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{},
				Annotations: map[string]string{v1alpha1.V1beta1FieldsAnnotation: `{"customVersionLabel":"v1","customVersion":"not a label value!"}`}}},
		},
		{
			name:        "an annotation that carries no selector is no spec.namespace, and stays",
			selector:    named,
			annotations: map[string]string{v1alpha1.V1alpha1FieldsAnnotation: `{"namespace":"shop","namespaceSelector":{"matchExpressions":[{"key":"env","operator":"In"}]}}`},
			want: v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
				v1alpha1.V1alpha1FieldsAnnotation: `{"namespace":"shop","namespaceSelector":{"matchExpressions":[{"key":"env","operator":"In"}]}}`}},
				Spec: v1alpha1.SidecarSetSpec{NamespaceSelector: named}},
		},
		{
			name:        "an empty custom-version label comes back from the annotation",
			annotations: map[string]string{v1alpha1.V1alpha1FieldsAnnotation: `{"customVersionLabel":""}`},
			want: v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.SidecarSetCustomVersionLabel: ""},
				Annotations: map[string]string{}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			beta := &v1beta1.SidecarSet{
				ObjectMeta: metav1.ObjectMeta{Labels: tt.labels, Annotations: tt.annotations},
				Spec:       v1beta1.SidecarSetSpec{CustomVersion: tt.customVersion, NamespaceSelector: tt.selector},
			}
			var got v1alpha1.SidecarSet
			require.NoError(t, got.ConvertFrom(beta))
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestConvertTo(t *testing.T) {
	alpha := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v2", "team": "a"}},
		Spec: v1alpha1.SidecarSetSpec{
			Namespace:         "shop",
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		},
	}
	var beta v1beta1.SidecarSet
	require.NoError(t, alpha.ConvertTo(&beta))
	assert.Equal(t, &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "shop"}}, beta.Spec.NamespaceSelector,
		"spec.namespace replaces the namespaceSelector")
	assert.Equal(t, "v2", beta.Spec.CustomVersion)
	assert.Equal(t, map[string]string{"team": "a"}, beta.Labels, "the label moved to spec.customVersion")
	assert.Equal(t, map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v2", "team": "a"}, alpha.Labels, "the source is not modified")
}

// Issue 35 item 2: the API server checks the labels and annotations a conversion answers as it
// checks a write, and fails the whole list or watch when one object's are refused. Whatever a
// stored v1beta1 SidecarSet holds — a spec.customVersion admitted before it was validated as a
// label value, annotations at their size limit — its v1alpha1 form is one the API server takes.
func TestConvertFromAnswersMetadataTheAPIServerTakes(t *testing.T) {
	atLimit := func(room int) map[string]string {
		key := "example.com/filler"
		return map[string]string{key: strings.Repeat("x", apivalidation.TotalAnnotationSizeLimitB-len(key)-room)}
	}
	tests := []struct {
		name          string
		labels        map[string]string
		annotations   map[string]string
		customVersion string
		roundTrip     bool
	}{
		{name: "the probe's customVersion", customVersion: "not a label value!", roundTrip: true},
		{name: "a customVersion one character too long", customVersion: strings.Repeat("v", 64), roundTrip: true},
		{name: "a customVersion that starts with a dash", customVersion: "-v1", roundTrip: true},
		{
			name: "the custom-version label of its own too", customVersion: "not a label value!", roundTrip: true,
			labels: map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v1"},
		},
		{
			// What v1alpha1 readers lose here they would lose anyway: the object is unreadable
			// otherwise.
			name: "annotations with no room for what the conversion carries", customVersion: "not a label value!",
			labels: map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v1"}, annotations: atLimit(10),
		},
		{name: "annotations at their limit, nothing to carry", customVersion: "v1", annotations: atLimit(0), roundTrip: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			beta := &v1beta1.SidecarSet{
				ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: tt.labels, Annotations: tt.annotations},
				Spec:       v1beta1.SidecarSetSpec{CustomVersion: tt.customVersion},
			}
			var alpha v1alpha1.SidecarSet
			require.NoError(t, alpha.ConvertFrom(beta))
			assert.Empty(t, metav1validation.ValidateLabels(alpha.Labels, field.NewPath("metadata", "labels")))
			assert.Empty(t, apivalidation.ValidateAnnotations(alpha.Annotations, field.NewPath("metadata", "annotations")))
			if tt.roundTrip {
				var back v1beta1.SidecarSet
				require.NoError(t, alpha.ConvertTo(&back))
				assert.True(t, apiequality.Semantic.DeepEqual(beta, &back), "the round trip changed the object:\n%s", diff.Diff(beta, &back))
			}
		})
	}
}

// On migration path B the SidecarSet CRD's conversion is OpenKruise's (docs/decisions.md D10). Both
// conversions agree on every field as OpenKruise's is specified (docs/openkruise-compat.md §1.2): a
// non-empty spec.namespace becomes the namespaceSelector on its name label, replacing any other; the
// custom-version label moves to spec.customVersion and back; every other field is copied. What
// sidecarops' adds is only its two annotations, which carry what OpenKruise's drops through a round
// trip: on path B a v1alpha1 client that reads and writes back loses spec.namespace (the selector
// stays) as it did before the switch.
func TestAgreesWithOpenKruisesConversion(t *testing.T) {
	f := randomobjects.Filler(t, 3)
	ours := func(meta *metav1.ObjectMeta) {
		delete(meta.Annotations, v1alpha1.V1alpha1FieldsAnnotation)
		delete(meta.Annotations, v1alpha1.V1beta1FieldsAnnotation)
		if len(meta.Annotations) == 0 {
			meta.Annotations = nil
		}
	}
	n := 0
	for _, label := range []*string{nil, ptr.To("v1")} {
		for _, namespace := range []string{"", "shop"} {
			for _, selector := range selectors {
				alpha := fill[v1alpha1.SidecarSet](f)
				setLabel(&alpha.ObjectMeta, label)
				alpha.Spec.Namespace = namespace
				alpha.Spec.NamespaceSelector = selector.DeepCopy()

				// OpenKruise's v1alpha1 → v1beta1.
				want := &v1beta1.SidecarSet{ObjectMeta: *alpha.ObjectMeta.DeepCopy(), Status: *alpha.Status.DeepCopy()}
				s := alpha.Spec.DeepCopy()
				want.Spec = v1beta1.SidecarSetSpec{Selector: s.Selector, NamespaceSelector: s.NamespaceSelector,
					InitContainers: s.InitContainers, Containers: s.Containers, Volumes: s.Volumes, UpdateStrategy: s.UpdateStrategy,
					InjectionStrategy: s.InjectionStrategy, ImagePullSecrets: s.ImagePullSecrets, RevisionHistoryLimit: s.RevisionHistoryLimit,
					PatchPodMetadata: s.PatchPodMetadata}
				if namespace != "" {
					want.Spec.NamespaceSelector = v1beta1.NamespaceNamed(namespace)
				}
				if label != nil {
					want.Spec.CustomVersion = *label
					delete(want.Labels, v1alpha1.SidecarSetCustomVersionLabel)
				}
				var got v1beta1.SidecarSet
				require.NoError(t, alpha.DeepCopy().ConvertTo(&got))
				ours(&got.ObjectMeta)
				require.True(t, apiequality.Semantic.DeepEqual(want, &got), "v1alpha1 → v1beta1, label %v, namespace %q, selector %v:\n%s",
					ptr.Deref(label, "<none>"), namespace, selector, diff.Diff(want, &got))

				// OpenKruise's v1beta1 → v1alpha1, from what it stores.
				beta := want
				back := &v1alpha1.SidecarSet{ObjectMeta: *beta.ObjectMeta.DeepCopy(), Status: *beta.Status.DeepCopy()}
				b := beta.Spec.DeepCopy()
				back.Spec = v1alpha1.SidecarSetSpec{Selector: b.Selector, NamespaceSelector: b.NamespaceSelector,
					InitContainers: b.InitContainers, Containers: b.Containers, Volumes: b.Volumes, UpdateStrategy: b.UpdateStrategy,
					InjectionStrategy: b.InjectionStrategy, ImagePullSecrets: b.ImagePullSecrets, RevisionHistoryLimit: b.RevisionHistoryLimit,
					PatchPodMetadata: b.PatchPodMetadata}
				if b.CustomVersion != "" {
					metav1.SetMetaDataLabel(&back.ObjectMeta, v1alpha1.SidecarSetCustomVersionLabel, b.CustomVersion)
				}
				beta = beta.DeepCopy()
				var gotAlpha v1alpha1.SidecarSet
				require.NoError(t, gotAlpha.ConvertFrom(beta))
				ours(&gotAlpha.ObjectMeta)
				require.True(t, apiequality.Semantic.DeepEqual(back, &gotAlpha), "v1beta1 → v1alpha1, label %v, namespace %q, selector %v:\n%s",
					ptr.Deref(label, "<none>"), namespace, selector, diff.Diff(back, &gotAlpha))
				n++
			}
		}
	}
	require.Equal(t, 2*2*len(selectors), n)
}
