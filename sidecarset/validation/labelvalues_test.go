package validation

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Issue 35 item 2: spec.customVersion becomes the label apps.kruise.io/sidecarset-custom-version
// of the ControllerRevision and, in v1alpha1, of the SidecarSet; the API server refuses both when
// it is no label value, and with the v1alpha1 object every v1alpha1 list of SidecarSets.
func TestCustomVersionIsALabelValue(t *testing.T) {
	withVersion := func(v string) func(*v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) { ss.Spec.CustomVersion = v }
	}
	run(t, []validCase{
		{name: "none", mutate: withVersion(""), want: []want{}},
		{name: "a label value", mutate: withVersion("v1.2_3-rc"), want: []want{}},
		{name: "63 characters", mutate: withVersion(strings.Repeat("v", 63)), want: []want{}},
		{
			name:   "the probe's value",
			mutate: withVersion("not a label value!"),
			want:   []want{invalid("spec.customVersion")},
			detail: "a valid label must be an empty string or consist of alphanumeric characters",
		},
		{
			name:   "64 characters",
			mutate: withVersion(strings.Repeat("v", 64)),
			want:   []want{invalid("spec.customVersion")},
			detail: "must be no more than 63 bytes",
		},
		{name: "starts with a dash", mutate: withVersion("-v1"), want: []want{invalid("spec.customVersion")}},
		{name: "ends with a dot", mutate: withVersion("v1."), want: []want{invalid("spec.customVersion")}},
		{name: "a slash", mutate: withVersion("team/v1"), want: []want{invalid("spec.customVersion")}},
	})
}

// A HotUpgrade sidecar runs in pods as <name>-1 and <name>-2, which become container names and
// annotation keys: a name that leaves them no room, or twins named as another sidecar, would make
// the API server refuse every pod the SidecarSet injects.
func TestHotUpgradeTwinNames(t *testing.T) {
	hot := func(name string) v1beta1.SidecarContainer {
		c := sidecar(name)
		c.UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1"}
		return c
	}
	nativeHot := func(name string) v1beta1.SidecarContainer {
		c := hot(name)
		c.RestartPolicy = &always
		return c
	}
	run(t, []validCase{
		{
			name: "61 characters leave room for -1 and -2",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = []v1beta1.SidecarContainer{hot(strings.Repeat("a", 61))}
			},
			want: []want{},
		},
		{
			name: "62 characters do not",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = []v1beta1.SidecarContainer{hot(strings.Repeat("a", 62))}
			},
			want:   []want{invalid("spec.containers[0].name")},
			detail: "a HotUpgrade sidecar runs in pods as " + strings.Repeat("a", 62) + "-1 and " + strings.Repeat("a", 62) + "-2: must be no more than 63 bytes",
		},
		{
			name: "a ColdUpgrade sidecar runs as itself: 63 characters",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = []v1beta1.SidecarContainer{sidecar(strings.Repeat("a", 63))}
			},
			want: []want{},
		},
		{
			name: "a twin named as another sidecar",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = []v1beta1.SidecarContainer{hot("envoy"), sidecar("envoy-2")}
			},
			want:   []want{invalid("spec.containers[0].name")},
			detail: "envoy-2 is another sidecar of this SidecarSet",
		},
		{
			name: "a twin named as an initContainer",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = []v1beta1.SidecarContainer{hot("envoy")}
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{sidecar("envoy-1")}
			},
			want: []want{invalid("spec.containers[0].name")},
		},
		{
			name: "a native sidecar initContainer runs as twins too",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{nativeHot(strings.Repeat("i", 62))}
			},
			want: []want{invalid("spec.initContainers[0].name")},
		},
		{
			name: "a plain initContainer runs once, as itself",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{hot(strings.Repeat("i", 62))}
			},
			want: []want{},
		},
		{
			name: "an invalid name is reported once, by the container rules",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = []v1beta1.SidecarContainer{hot(strings.Repeat("A", 62))}
			},
			want: []want{invalid("spec.containers[0].name")},
		},
	})
}

// Issue 35 item 5: V1alpha1FieldsAnnotation gives v1alpha1 readers spec.namespace and the
// namespaceSelector written beside it. When new or changed, it must be what the conversion writes
// for the spec, and the selector it carries must be one; one left as it was is not judged again.
func TestV1alpha1FieldsAnnotation(t *testing.T) {
	const key = v1alpha1.V1alpha1FieldsAnnotation
	path := "metadata.annotations[" + key + "]"
	scoped := func(annotation string) func(*v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) {
			ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed("shop")
			ss.Annotations = map[string]string{key: annotation}
		}
	}
	prod := func(annotation string) func(*v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) {
			ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
			ss.Annotations = map[string]string{key: annotation}
		}
	}
	stored := func(mutate func(*v1beta1.SidecarSet)) func() *v1beta1.SidecarSet {
		return func() *v1beta1.SidecarSet {
			ss := base()
			mutate(ss)
			return ss
		}
	}
	const (
		asWritten   = `{"namespace":"shop"}`
		withValid   = `{"namespace":"shop","namespaceSelector":{"matchLabels":{"env":"prod"}}}`
		withInvalid = `{"namespace":"shop","namespaceSelector":{"matchExpressions":[{"key":"env","operator":"In"}]}}`
		withBadKey  = `{"namespace":"shop","namespaceSelector":{"matchLabels":{"not a key":"x"}}}`
	)
	run(t, []validCase{
		{name: "as the conversion writes it", mutate: scoped(asWritten), want: []want{}},
		{name: "with the namespaceSelector written beside spec.namespace", mutate: scoped(withValid), want: []want{}},
		{
			name:   "the probe's: an invalid namespaceSelector beside spec.namespace",
			mutate: scoped(withInvalid),
			want:   []want{required(path + ".namespaceSelector.matchExpressions[0].values"), invalid(path + ".namespaceSelector")},
		},
		{
			name:   "a namespaceSelector key that is no label key",
			mutate: scoped(withBadKey),
			want:   []want{invalid(path + ".namespaceSelector.matchLabels"), invalid(path + ".namespaceSelector")},
		},
		{
			name:   "the probe's: written by hand for a spec it does not describe",
			mutate: prod(withValid),
			want:   []want{invalid(path)},
			detail: "does not describe spec.namespaceSelector and spec.customVersion",
		},
		{
			name:   "another namespace than the spec's",
			mutate: scoped(`{"namespace":"other"}`),
			want:   []want{invalid(path)},
		},
		{
			name:   "not as the conversion writes it, though it means the same",
			mutate: scoped(`{"namespace": "shop"}`),
			want:   []want{invalid(path)},
		},
		{
			name:   "not JSON",
			mutate: scoped(`namespace: shop`),
			want:   []want{invalid(path)},
			detail: "not the JSON the conversion writes",
		},
		{
			name:   "an empty custom-version label, which v1alpha1 reads as no custom version",
			mutate: scoped(`{"namespace":"shop","customVersionLabel":""}`),
			want:   []want{},
		},
		{
			name: "an empty custom-version label beside a spec.customVersion",
			mutate: func(ss *v1beta1.SidecarSet) {
				scoped(`{"namespace":"shop","customVersionLabel":""}`)(ss)
				ss.Spec.CustomVersion = "v1"
			},
			want: []want{invalid(path)},
		},
		{
			name:   "left unchanged after a v1beta1 client changed the spec",
			mutate: prod(asWritten),
			old:    stored(scoped(asWritten)),
			want:   []want{},
		},
		{
			name:   "stored before it was validated, and left unchanged",
			mutate: scoped(withInvalid),
			old:    stored(scoped(withInvalid)),
			want:   []want{},
		},
		{
			name:   "changed on UPDATE to one that does not describe the spec",
			mutate: prod(withValid),
			old:    stored(prod(asWritten)),
			want:   []want{invalid(path)},
		},
		{
			name:   "added on UPDATE",
			mutate: prod(asWritten),
			old:    stored(func(ss *v1beta1.SidecarSet) { prod("")(ss); ss.Annotations = nil }),
			want:   []want{invalid(path)},
		},
	})
}

// patchPodMetadata's annotations land on every pod the SidecarSet is injected into: patches each
// within the size limit but past it together would have the API server refuse every such pod.
func TestPatchPodMetadataFitsOnAPod(t *testing.T) {
	half := func(key string) map[string]string {
		return map[string]string{key: strings.Repeat("x", 130*1024)}
	}
	patches := func(annotations ...map[string]string) func(*v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) {
			for _, a := range annotations {
				ss.Spec.PatchPodMetadata = append(ss.Spec.PatchPodMetadata, v1beta1.SidecarSetPatchPodMetadata{Annotations: a})
			}
		}
	}
	run(t, []validCase{
		{name: "one patch within the limit", mutate: patches(half("e2e.example.com/a")), want: []want{}},
		{
			name:   "two, past it together",
			mutate: patches(half("e2e.example.com/a"), half("e2e.example.com/b")),
			want:   []want{invalid("spec.patchPodMetadata")},
			detail: "the patches together write more than a pod may hold",
		},
		{
			name:   "one past it on its own is told so once",
			mutate: patches(map[string]string{"e2e.example.com/a": strings.Repeat("x", 300*1024)}, half("e2e.example.com/b")),
			want:   []want{{field.ErrorTypeTooLong, "spec.patchPodMetadata[0].annotations"}},
		},
	})
}
