package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
)

type counts struct{ matched, updated, ready, updatedReady int32 }

func statusCounts(s v1alpha1.SidecarSetStatus) counts {
	return counts{s.MatchedPods, s.UpdatedPods, s.ReadyPods, s.UpdatedReadyPods}
}

// TestColdUpgradeSequenceC6 plays the five C6 rounds: status is computed before acting, and the
// in-flight pod-1 holds the single maxUnavailable slot until the kubelet reports v2.
func TestColdUpgradeSequenceC6(t *testing.T) {
	ss := ssC13()
	pods := c13Pods(2, 0, 0)
	p1, p2 := pods[0], pods[1]

	assert.Equal(t, counts{2, 0, 2, 0}, statusCounts(Status(ss, pods, "rev", 0)), "round 1")
	plan := NextUpgrade(ss, pods)
	require.Len(t, plan.Upgrade, 1)
	upgraded(plan.Upgrade[0])
	other := p2
	if plan.Upgrade[0] == p2 {
		other = p1
	}
	first := plan.Upgrade[0]

	assert.Equal(t, counts{2, 1, 1, 0}, statusCounts(Status(ss, pods, "rev", 0)), "round 2")
	assert.Empty(t, NextUpgrade(ss, pods).Upgrade, "round 2: budget used by the in-flight pod")

	upgradedAndReady(first)
	assert.Equal(t, counts{2, 1, 2, 1}, statusCounts(Status(ss, pods, "rev", 0)), "round 3")
	assert.Equal(t, []*corev1.Pod{other}, NextUpgrade(ss, pods).Upgrade)
	upgraded(other)

	assert.Equal(t, counts{2, 2, 1, 1}, statusCounts(Status(ss, pods, "rev", 0)), "round 4")
	upgradedAndReady(other)
	st := Status(ss, pods, "rev", 0)
	assert.Equal(t, counts{2, 2, 2, 2}, statusCounts(st), "round 5")
	assert.Equal(t, int64(3), st.ObservedGeneration)
	assert.Equal(t, "rev", st.LatestRevision)
}

// TestHotUpgradeStatusC19: the idle twin holding the new image keeps the pod unready until reset.
func TestHotUpgradeStatusC19(t *testing.T) {
	ss := ssC13()
	ss.Spec.Containers[0].UpgradeStrategy = v1alpha1.SidecarContainerUpgradeStrategy{UpgradeType: v1alpha1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "hotupgrade:empty"}
	pod := podC13(0)
	pod.Annotations[v1alpha1.SidecarSetWorkingHotUpgradeContainer] = `{"test-sidecar":"test-sidecar-1"}`
	pod.Spec.Containers = []corev1.Container{{Name: "nginx", Image: "nginx:1"}, {Name: "test-sidecar-1", Image: "test-image:v1"}, {Name: "test-sidecar-2", Image: "hotupgrade:empty"}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "nginx", Image: "nginx:1", ImageID: "nginx-id", Ready: true},
		{Name: "test-sidecar-1", Image: "test-image:v1", ImageID: "v1-id", Ready: true},
		{Name: "test-sidecar-2", Image: "hotupgrade:empty", ImageID: "empty-id", Ready: true},
	}
	pods := []*corev1.Pod{pod}
	assert.True(t, IsManaged(pod, ss))
	assert.Equal(t, counts{1, 0, 1, 0}, statusCounts(Status(ss, pods, "", 0)), "round 1")
	assert.Len(t, NextUpgrade(ss, pods).Upgrade, 1)

	// Controller upgrades -2 to v2 and points the working record at it.
	pod.Spec.Containers[2].Image = "test-image:v2"
	pod.Annotations[v1alpha1.SidecarSetWorkingHotUpgradeContainer] = `{"test-sidecar":"test-sidecar-2"}`
	pod.Annotations[v1alpha1.SidecarSetHashAnnotation] = hashAnn("test-sidecarset", "bbb")
	pod.Annotations[v1alpha1.SidecarSetInplaceUpdateStateAnnotation] = `{"test-sidecarset":{"revision":"bbb","updateTimestamp":null,"lastContainerStatuses":{"test-sidecar-2":{"imageID":"empty-id"}}}}`
	assert.Equal(t, counts{1, 1, 0, 0}, statusCounts(Status(ss, pods, "", 0)), "round 2")

	pod.Status.ContainerStatuses[2].Image, pod.Status.ContainerStatuses[2].ImageID = "test-image:v2", "v2-id"
	assert.Equal(t, counts{1, 1, 0, 0}, statusCounts(Status(ss, pods, "", 0)), "round 3: -1 not yet reset")
	assert.True(t, IsHotUpgrading(pod, ss))

	pod.Spec.Containers[1].Image = "hotupgrade:empty"
	pod.Status.ContainerStatuses[1].Image, pod.Status.ContainerStatuses[1].ImageID = "hotupgrade:empty", "empty-id"
	assert.Equal(t, counts{1, 1, 1, 1}, statusCounts(Status(ss, pods, "", 0)), "round 4")
	assert.False(t, IsHotUpgrading(pod, ss))
}

func TestStatusEqual(t *testing.T) {
	one, one2, two := int32(1), int32(1), int32(2)
	a := v1alpha1.SidecarSetStatus{MatchedPods: 1, CollisionCount: &one}
	b := a
	b.CollisionCount = &one2
	assert.True(t, StatusEqual(a, b))
	b.CollisionCount = &two
	assert.False(t, StatusEqual(a, b))
	b.CollisionCount = nil
	assert.False(t, StatusEqual(a, b))
	b = a
	b.UpdatedReadyPods = 1
	assert.False(t, StatusEqual(a, b))
	assert.Equal(t, int32(0), Status(nil, []*corev1.Pod{nil}, "", 0).MatchedPods)
}

func TestUpgradableCondition(t *testing.T) {
	pod := podC13(0)
	c, changed, err := UpgradableCondition(pod, "b", false, t0)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, corev1.ConditionFalse, c.Status)
	assert.Equal(t, "UpdateImmutableField", c.Reason)
	assert.Equal(t, `{"b":false}`, c.Message)
	assert.Empty(t, pod.Status.Conditions[1:], "pod not modified")

	pod.Status.Conditions = append(pod.Status.Conditions, c)
	_, changed, _ = UpgradableCondition(pod, "b", false, t0)
	assert.False(t, changed, "no patch when nothing changes")
	c, changed, _ = UpgradableCondition(pod, "a", true, t0)
	assert.True(t, changed)
	assert.Equal(t, `{"a":true,"b":false}`, c.Message)
	assert.Equal(t, corev1.ConditionFalse, c.Status)
	pod.Status.Conditions[1] = c
	c, _, _ = UpgradableCondition(pod, "b", true, t0)
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Equal(t, "AllSidecarsetUpgradable", c.Reason)

	pod.Status.Conditions[1].Message = "{bad"
	_, _, err = UpgradableCondition(pod, "b", true, t0)
	assert.Error(t, err)
}
