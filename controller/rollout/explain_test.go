package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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

func TestPodChangedFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*v1beta1.SidecarSet, *corev1.Pod)
		want []string
	}{
		{"image only", func(*v1beta1.SidecarSet, *corev1.Pod) {}, nil},
		{"command and env", func(ss *v1beta1.SidecarSet, _ *corev1.Pod) {
			ss.Spec.Containers[0].Command = []string{"run"}
			ss.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
		}, []string{"spec.containers[0].command", "spec.containers[0].env"}},
		{"what injection adds is no change", func(ss *v1beta1.SidecarSet, pod *corev1.Pod) {
			ss.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
			ss.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "own", MountPath: "/own"}}
			// transferEnv and a shared volume, and the API server's defaults.
			pod.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "FROM_APP", Value: "x"}}
			pod.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "own", MountPath: "/own"}, {Name: "app-logs", MountPath: "/logs"}}
			pod.Spec.Containers[1].TerminationMessagePath = corev1.TerminationMessagePathDefault
		}, nil},
		{"resources computed by resourcesPolicy", func(ss *v1beta1.SidecarSet, pod *corev1.Pod) {
			ss.Spec.Containers[0].ResourcesPolicy = &v1beta1.ResourcesPolicy{TargetContainersMode: "sum"}
			pod.Spec.Containers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, nil},
		{"added", func(ss *v1beta1.SidecarSet, _ *corev1.Pod) { ss.Spec.Containers[0].Name = "renamed" },
			[]string{"spec.containers[0] (renamed) added"}},
		{"hot upgrade twin", func(ss *v1beta1.SidecarSet, pod *corev1.Pod) {
			ss.Spec.Containers[0].UpgradeStrategy.UpgradeType = v1beta1.SidecarContainerHotUpgrade
			ss.Spec.Containers[0].Args = []string{"--v2"}
			pod.Spec.Containers[1].Name = "test-sidecar-2"
			pod.Annotations[v1beta1.SidecarSetWorkingHotUpgradeContainer] = `{"test-sidecar":"test-sidecar-2"}`
		}, []string{"spec.containers[0].args"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss, pod := ssC13(), podC13(0)
			tc.edit(ss, pod)
			assert.Equal(t, tc.want, PodChangedFields(pod, ss))
		})
	}
}
