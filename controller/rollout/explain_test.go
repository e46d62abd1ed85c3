package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

func TestChangedFields(t *testing.T) {
	base := ssC13()
	for _, tc := range []struct {
		name string
		edit func(*v1beta1.SidecarSet)
		want []string
	}{
		{"image only", func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = "test-image:v9" }, nil},
		{"env and command", func(ss *v1beta1.SidecarSet) {
			ss.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
			ss.Spec.Containers[0].Command = []string{"run"}
		}, []string{"spec.containers[0].command", "spec.containers[0].env"}},
		{"upgrade strategy", func(ss *v1beta1.SidecarSet) {
			ss.Spec.Containers[0].UpgradeStrategy.UpgradeType = v1beta1.SidecarContainerHotUpgrade
		}, []string{"spec.containers[0].upgradeStrategy"}},
		{"added and removed", func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Name = "renamed" },
			[]string{"spec.containers[0] (renamed) added", "spec.containers (test-sidecar) removed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := base.DeepCopy()
			tc.edit(ss)
			assert.Equal(t, tc.want, ChangedFields(base, ss))
		})
	}
}

func TestExplainNotUpgradable(t *testing.T) {
	ss := ssC13()
	cr, err := NewRevision(ss, "sys", 1, 0)
	require.NoError(t, err)
	pod := podC13(0)
	assert.Empty(t, ExplainNotUpgradable(pod, ss, nil), "upgradable")

	changed := ss.DeepCopy()
	changed.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "new"}}
	changed.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = "without-bbb"
	pod.Annotations[v1beta1.SidecarSetHashAnnotation] = `{"test-sidecarset":{"hash":"aaa","controllerRevision":"` + cr.Name + `"}}`
	assert.Equal(t, "changed since revision "+cr.Name+", which the pod runs: spec.containers[0].env (only images can change in place)",
		ExplainNotUpgradable(pod, changed, []*appsv1.ControllerRevision{cr}))
	assert.Contains(t, ExplainNotUpgradable(pod, changed, nil), "hash-without-image differs", "without the revision: the hashes")
}
