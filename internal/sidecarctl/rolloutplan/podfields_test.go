package rolloutplan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// A SidecarSet at test-image:v2 and a pod it injected at v1: they differ by image only.
func changedFieldsSidecarSet() *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "test-sidecarset"},
		Spec: v1beta1.SidecarSetSpec{
			Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "test-sidecar", Image: "test-image:v2"}}},
		},
	}
}

func changedFieldsPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-0", Namespace: "default", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "nginx", Image: "nginx:1"},
			{Name: "test-sidecar", Image: "test-image:v1"},
		}},
	}
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
			ss, pod := changedFieldsSidecarSet(), changedFieldsPod()
			tc.edit(ss, pod)
			assert.Equal(t, tc.want, podChangedFields(pod, ss))
		})
	}
}
