package versions

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
)

func alpha() *v1alpha1.SidecarSet {
	return &v1alpha1.SidecarSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "SidecarSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v2"}},
		Spec: v1alpha1.SidecarSetSpec{
			Namespace:         "shop",
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		},
	}
}

func TestNew(t *testing.T) {
	for version, want := range map[string]any{"v1alpha1": &v1alpha1.SidecarSet{}, "v1beta1": &v1beta1.SidecarSet{}} {
		got, err := New(version)
		require.NoError(t, err)
		assert.IsType(t, want, got)
	}
	_, err := New("v2")
	assert.EqualError(t, err, `unsupported version "v2" of SidecarSet.apps.kruise.io (served: v1alpha1, v1beta1)`)
}

// What a v1alpha1 client wrote comes back as written where the versions differ, with the hub's
// changes everywhere else.
func TestWrittenRoundTrip(t *testing.T) {
	w, err := Of(alpha())
	require.NoError(t, err)
	assert.Equal(t, "apps.kruise.io/v1beta1", w.Hub.APIVersion)
	assert.Equal(t, v1beta1.NamespaceNamed("shop"), w.Hub.Spec.NamespaceSelector)
	assert.Equal(t, "v2", w.Hub.Spec.CustomVersion)

	w.Hub.Annotations = map[string]string{"defaulted": "yes"}
	obj, err := w.Object()
	require.NoError(t, err)
	back, ok := obj.(*v1alpha1.SidecarSet)
	require.True(t, ok)
	assert.Equal(t, "shop", back.Spec.Namespace)
	assert.Equal(t, alpha().Spec.NamespaceSelector, back.Spec.NamespaceSelector, "kept as written, not replaced by the namespace's")
	assert.Equal(t, "v2", back.Labels[v1alpha1.SidecarSetCustomVersionLabel])
	assert.Equal(t, "yes", back.Annotations["defaulted"])
	assert.Equal(t, "apps.kruise.io/v1alpha1", back.APIVersion)

	hub := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	w, err = Of(hub)
	require.NoError(t, err)
	obj, err = w.Object()
	require.NoError(t, err)
	assert.Same(t, hub, obj)
}

func TestErrors(t *testing.T) {
	errs := field.ErrorList{
		field.Invalid(field.NewPath("spec", "namespaceSelector", "matchLabels"), "not a name", "bad"),
		field.Invalid(field.NewPath("spec", "namespaceSelector"), "{}", "also bad"),
		field.Required(field.NewPath("spec", "selector"), ""),
	}
	a := alpha()
	a.Spec.Namespace = "not a name"
	w, err := Of(a)
	require.NoError(t, err)
	got := w.Errors(errs)
	require.Len(t, got, 2, "one error for the one string written")
	assert.Equal(t, `spec.namespace: Invalid value: "not a name": bad`, got[0].Error())
	assert.Equal(t, "spec.selector", got[1].Field)
	assert.Equal(t, "spec.namespaceSelector.matchLabels", errs[0].Field, "the input is not modified")

	w, err = Of(&v1beta1.SidecarSet{})
	require.NoError(t, err)
	assert.Equal(t, errs, w.Errors(errs), "v1beta1 names its own fields")
	a.Spec.Namespace = ""
	w, err = Of(a)
	require.NoError(t, err)
	assert.Equal(t, errs, w.Errors(errs), "a v1alpha1 namespaceSelector is its own too")
}

// The namespaceSelector written beside spec.namespace, which validation reports inside the
// annotation the conversion keeps it in, and spec.customVersion, which v1alpha1 writes as a label
// (or, when it is no label value, as the annotation that carries it), are named as written.
func TestErrorsNameWhatV1alpha1Wrote(t *testing.T) {
	carried := field.NewPath("metadata", "annotations").Key(v1alpha1.V1alpha1FieldsAnnotation).Child("namespaceSelector")
	errs := field.ErrorList{
		field.Required(carried.Child("matchExpressions").Index(0).Child("values"), ""),
		field.Invalid(carried, "{}", "bad"),
		field.Invalid(field.NewPath("spec", "customVersion"), "not a label value!", "bad"),
	}
	fields := func(errs field.ErrorList) []string {
		var out []string
		for _, e := range errs {
			out = append(out, e.Field)
		}
		return out
	}

	w, err := Of(alpha())
	require.NoError(t, err)
	assert.Equal(t, []string{
		"spec.namespaceSelector.matchExpressions[0].values",
		"spec.namespaceSelector",
		"metadata.labels[apps.kruise.io/sidecarset-custom-version]",
	}, fields(w.Errors(errs)))

	a := alpha()
	a.Spec.Namespace = ""
	a.Labels = nil
	a.Annotations = map[string]string{v1alpha1.V1beta1FieldsAnnotation: `{"customVersion":"not a label value!"}`}
	w, err = Of(a)
	require.NoError(t, err)
	assert.Equal(t, []string{
		carried.Child("matchExpressions").Index(0).Child("values").String(),
		carried.String(),
		"metadata.annotations[conversion.sidecarops.io/v1beta1-fields]",
	}, fields(w.Errors(errs)), "without spec.namespace the annotation is the client's own")
}

// The defaulting webhook answers a v1alpha1 client's custom-version label as written, even one
// that is no label value: moved to an annotation by the conversion, the API server would never
// say what is wrong with it.
func TestObjectKeepsTheLabelAsWritten(t *testing.T) {
	a := alpha()
	a.Labels[v1alpha1.SidecarSetCustomVersionLabel] = "not a label value!"
	w, err := Of(a)
	require.NoError(t, err)
	require.Equal(t, "not a label value!", w.Hub.Spec.CustomVersion)
	obj, err := w.Object()
	require.NoError(t, err)
	back, ok := obj.(*v1alpha1.SidecarSet)
	require.True(t, ok)
	assert.Equal(t, a.Labels, back.Labels)
	assert.NotContains(t, back.Annotations, v1alpha1.V1beta1FieldsAnnotation)
}
