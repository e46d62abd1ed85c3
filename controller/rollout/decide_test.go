package rollout

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// The controller decides from every pod after a full count, and from the counts kept from pod
// events with the pods left to upgrade during a rollout: both views must decide the same round.
func TestViewsDecideAlike(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 500; iter++ {
		ss, pods := randomRound(r, false)
		require.True(t, PlansFromCounts(ss))
		notUpdated, c := kept(ss, pods)
		h := History{Latest: "rev", CollisionCount: 1}
		every, fromCounts := Decide(ss, EveryPod(pods), h), Decide(ss, KeptCounts{Counts: c, NotUpdated: notUpdated}, h)
		assert.Equal(t, every.Status, fromCounts.Status, "iter %d", iter)
		assert.Equal(t, every.Rolling, fromCounts.Rolling, "iter %d", iter)
		assert.Equal(t, names(every.Upgrade), names(fromCounts.Upgrade), "iter %d", iter)
		assert.Equal(t, every.NotUpgradable, fromCounts.NotUpgradable, "iter %d", iter)
		assert.Equal(t, every.Events, fromCounts.Events, "iter %d", iter)
	}
}

// Decide's cases: what a round does and says, by compat §3.2's order: a stopped strategy does
// nothing, finished hot upgrades are reset first, a SidecarSet whose pods are all updated rolls
// nothing, and a rolling round upgrades, marks and explains.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pods     []*corev1.Pod
		change   func(ss *v1beta1.SidecarSet)
		rolling  bool
		upgrade  []string
		reasons  []string
		contains string
	}{{
		name:    "maxUnavailable 1: the newest ready pod",
		pods:    c13Pods(3, 0, 0),
		rolling: true, upgrade: []string{"pod-2"},
	}, {
		name:    "an upgraded pod not done takes the only slot: the rest wait, and are told why",
		pods:    c13Pods(3, 1, 0),
		rolling: true, upgrade: nil, reasons: []string{ReasonRolloutWaiting},
		contains: "2 pod(s) wait for maxUnavailable (1 of 1 in use by updated pods not yet ready, plus 0 upgrading now)",
	}, {
		name:    "every pod updated: nothing to roll",
		pods:    c13Pods(2, 2, 2),
		rolling: false,
	}, {
		name:    "paused: nothing, and nothing said",
		pods:    c13Pods(3, 0, 0),
		change:  func(ss *v1beta1.SidecarSet) { ss.Spec.UpdateStrategy.Paused = true },
		rolling: false,
	}, {
		name:    "partition holds every candidate",
		pods:    c13Pods(2, 0, 0),
		change:  func(ss *v1beta1.SidecarSet) { ss.Spec.UpdateStrategy.Partition = &intstr.IntOrString{IntVal: 2} },
		rolling: true, reasons: []string{ReasonRolloutWaiting}, contains: "2 pod(s) held back by partition 2",
	}, {
		name: "a pod changed beyond its image is skipped and said so, the others go on",
		pods: func() []*corev1.Pod {
			pods := c13Pods(2, 0, 0)
			pods[0].Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = hashAnn("test-sidecarset", "other")
			return pods
		}(),
		rolling: true, upgrade: []string{"pod-1"}, reasons: []string{ReasonNotUpgradablePods},
		contains: "detected 1 not upgradable pod(s) in this round, will skip them. First: default/pod-0",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ss := ssC13()
			if tc.change != nil {
				tc.change(ss)
			}
			// The revisions are read only for a pod to explain: a read of them is I/O in the controller.
			reads := 0
			a := Decide(ss, EveryPod(tc.pods), History{Revisions: func() []*appsv1.ControllerRevision { reads++; return nil }})
			assert.Equal(t, tc.rolling, a.Rolling)
			assert.Equal(t, tc.upgrade, namesOrNil(a.Upgrade))
			var reasons []string
			for _, e := range a.Events {
				reasons = append(reasons, e.Reason)
				assert.Equal(t, corev1.EventTypeNormal, e.Type)
				assert.Contains(t, e.Message, tc.contains)
			}
			assert.Equal(t, tc.reasons, reasons)
			assert.Equal(t, len(a.NotUpgradable) > 0, reads == 1, "revisions read %d times", reads)
			assert.LessOrEqual(t, reads, 1)
			if !a.Rolling {
				assert.Empty(t, a.Upgrade, "only a rolling round upgrades")
				assert.Empty(t, a.NotUpgradable, "only a rolling round marks")
			}
		})
	}
}

func namesOrNil(pods []*corev1.Pod) []string {
	if len(pods) == 0 {
		return nil
	}
	return names(pods)
}

// StillUpgradable is the retry's test: a fresh copy still a candidate is written, one that got
// updated meanwhile, or changed beyond its image, is not.
func TestStillUpgradable(t *testing.T) {
	ss := ssC13()
	assert.True(t, StillUpgradable(podC13(0), ss))
	assert.False(t, StillUpgradable(upgraded(podC13(0)), ss), "updated meanwhile")
	changed := podC13(0)
	changed.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = hashAnn("test-sidecarset", "other")
	assert.False(t, StillUpgradable(changed, ss), "changed beyond its image")
}
