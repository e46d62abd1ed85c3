package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

func TestStatusEqual(t *testing.T) {
	one, one2, two := int32(1), int32(1), int32(2)
	a := v1beta1.SidecarSetStatus{MatchedPods: 1, CollisionCount: &one}
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
