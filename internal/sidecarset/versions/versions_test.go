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
