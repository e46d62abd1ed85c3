package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/rollout"
)

// The pod the cache gives out keeps what the controller reads: every decision the controller makes
// on a pod is the same on the cached one (the interned record the pod informer's transform makes of
// it), and an upgrade computed from it changes the same fields.
func TestCachedPod(t *testing.T) {
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "log", Annotations: map[string]string{
		v1beta1.SidecarSetHashAnnotation: "h2", v1beta1.SidecarSetHashWithoutImageAnnotation: "w1",
	}}}
	ss.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	ss.Spec.Containers = []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "log", Image: "log:2"}}}
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web-0", Labels: map[string]string{"app": "web"}, ResourceVersion: "7",
			CreationTimestamp: metav1.NewTime(time.Unix(100, 0)),
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			Annotations: map[string]string{
				v1beta1.SidecarSetListAnnotation:             "log",
				v1beta1.SidecarSetHashAnnotation:             `{"log":{"hash":"h1"}}`,
				v1beta1.SidecarSetHashWithoutImageAnnotation: `{"log":{"hash":"w1"}}`,
			},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1",
			Containers: []corev1.Container{
				{Name: "log", Image: "log:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}},
				{Name: "app", Image: "app:1", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}},
			},
			Volumes:     []corev1.Volume{{Name: "data"}},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "log", Image: "log:1", ImageID: "sha256:l1", Ready: true},
				{Name: "app", Image: "app:1", ImageID: "sha256:a1", Ready: true},
			},
			PodIP: "10.0.0.1", QOSClass: corev1.PodQOSBurstable,
		},
	}
	inf := NewPods().NewInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0, toolscache.Indexers{}).(*podInformer)
	rec, err := inf.transform(cache.TransformStripManagedFields())(full.DeepCopy())
	require.NoError(t, err)
	trimmed := rec.(*compactPod).pod()

	assert.Nil(t, trimmed.ManagedFields)
	assert.Empty(t, trimmed.Spec.Volumes)
	assert.Empty(t, trimmed.Spec.Tolerations)
	assert.Nil(t, trimmed.Spec.Containers[0].Env)
	assert.Equal(t, full.Annotations, trimmed.Annotations)
	assert.Equal(t, "node-1", trimmed.Spec.NodeName)

	assert.Equal(t, rollout.IsManaged(full, ss), rollout.IsManaged(trimmed, ss))
	assert.Equal(t, rollout.PodCounts(full, ss), rollout.PodCounts(trimmed, ss))
	canFull, consistentFull := rollout.Upgradability(full, ss)
	canTrimmed, consistentTrimmed := rollout.Upgradability(trimmed, ss)
	assert.Equal(t, canFull, canTrimmed)
	assert.Equal(t, consistentFull, consistentTrimmed)
	assert.Equal(t, rollout.NextUpgrade(ss, []*corev1.Pod{full}).Upgrade != nil, rollout.NextUpgrade(ss, []*corev1.Pod{trimmed}).Upgrade != nil)

	now := time.Unix(200, 0)
	upFull, changedFull, err := rollout.Upgrade(full, ss, now)
	require.NoError(t, err)
	upTrimmed, changedTrimmed, err := rollout.Upgrade(trimmed, ss, now)
	require.NoError(t, err)
	assert.Equal(t, changedFull, changedTrimmed)
	assert.Equal(t, upFull.Annotations, upTrimmed.Annotations, "the same annotations written")
	assert.Equal(t, upFull.Spec.Containers[0].Image, upTrimmed.Spec.Containers[0].Image, "the same image written")
}
