package convert

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
)

func TestTarget(t *testing.T) {
	for _, to := range []string{"v1beta1", "apps.kruise.io/v1beta1"} {
		gv, err := Target(to)
		require.NoError(t, err)
		assert.Equal(t, v1beta1.GroupVersion, gv)
	}
	gv, err := Target("v1alpha1")
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.GroupVersion, gv)
	_, err = Target("apps/v1")
	assert.EqualError(t, err, `--to "apps/v1": unsupported SidecarSet version (v1alpha1 or v1beta1)`)
}

// A SidecarSet in the other version is converted (v1alpha1's spec.namespace becomes a selector on
// the namespace's name and back), one already in it and any other object are kept as they are.
func TestObjects(t *testing.T) {
	alpha := &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1alpha1.SidecarSetSpec{Namespace: "apps"}}
	beta := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}
	w := &workspace.Workspace{}
	for _, obj := range []runtime.Object{alpha, beta, ns} {
		w.Objects = append(w.Objects, &manifest.Object{Obj: obj})
	}

	out := Objects(w, v1beta1.GroupVersion)
	require.Len(t, out, 3)
	converted, ok := out[0].(*v1beta1.SidecarSet)
	require.True(t, ok, "%T", out[0])
	assert.Equal(t, map[string]string{v1beta1.NamespaceNameLabel: "apps"}, converted.Spec.NamespaceSelector.MatchLabels)
	assert.Same(t, beta, out[1])
	assert.Same(t, ns, out[2])

	out = Objects(w, v1alpha1.GroupVersion)
	assert.Same(t, alpha, out[0])
	back, ok := out[1].(*v1alpha1.SidecarSet)
	require.True(t, ok, "%T", out[1])
	assert.Equal(t, "b", back.Name)
	assert.NoError(t, w.Err())
}
