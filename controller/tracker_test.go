package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/rollout"
)

// trackedPod is a pod ss manages, at resourceVersion rv, updated to ss's hash or not.
func trackedPod(name, rv string, ss *v1beta1.SidecarSet, updated bool) *corev1.Pod {
	hash := "old"
	if updated {
		hash = ss.Annotations[v1beta1.SidecarSetHashAnnotation]
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, ResourceVersion: rv,
			Annotations: map[string]string{
				v1beta1.SidecarSetListAnnotation: ss.Name,
				v1beta1.SidecarSetHashAnnotation: `{"` + ss.Name + `":{"hash":"` + hash + `"}}`,
			},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar", Image: "s:1"}}},
	}
}

func TestTracker(t *testing.T) {
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "log", UID: "u", Generation: 1,
		Annotations: map[string]string{v1beta1.SidecarSetHashAnnotation: "h1"}}}
	ss.Spec.Containers = []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "sidecar", Image: "s:1"}}}
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	now := time.Unix(1000, 0)

	type step struct {
		touch []string        // pods whose events arrive, marked to be met by whatever the cache shows
		marks map[string]mark // pods marked as the informer's transform and handlers do
		cache []*corev1.Pod   // what the cache holds when the dirty pods are counted
		dirty []string        // the pods still marked after the step's settle
	}
	for _, tc := range []struct {
		name        string
		start       []*corev1.Pod // counted in full first
		steps       []step
		want        rollout.Counts // after settling
		relist      []*corev1.Pod  // a full count after the steps
		differences int
	}{{
		name:   "an upgraded pod's event moves it to updated",
		start:  []*corev1.Pod{trackedPod("a", "1", ss, false), trackedPod("b", "1", ss, true)},
		steps:  []step{{touch: []string{"a"}, cache: []*corev1.Pod{trackedPod("a", "2", ss, true), trackedPod("b", "1", ss, true)}}},
		want:   rollout.Counts{Matched: 2, Updated: 2},
		relist: []*corev1.Pod{trackedPod("a", "2", ss, true), trackedPod("b", "1", ss, true)},
	}, {
		name:   "a deleted pod's event removes it, a created one's adds it",
		start:  []*corev1.Pod{trackedPod("a", "1", ss, true)},
		steps:  []step{{touch: []string{"a", "c"}, cache: []*corev1.Pod{trackedPod("c", "5", ss, false)}}},
		want:   rollout.Counts{Matched: 1},
		relist: []*corev1.Pod{trackedPod("c", "5", ss, false)},
	}, {
		name:        "a version no event marked is a difference",
		start:       []*corev1.Pod{trackedPod("a", "1", ss, false)},
		want:        rollout.Counts{Matched: 1},
		relist:      []*corev1.Pod{trackedPod("a", "2", ss, true)},
		differences: 1,
	}, {
		name:        "a pod gone without an event is a difference, and so is one that came",
		start:       []*corev1.Pod{trackedPod("a", "1", ss, true)},
		want:        rollout.Counts{Matched: 1, Updated: 1},
		relist:      []*corev1.Pod{trackedPod("b", "1", ss, true)},
		differences: 2,
	}, {
		name:   "a version marked after settling is counted next round, not a difference",
		start:  []*corev1.Pod{trackedPod("a", "1", ss, false)},
		steps:  []step{{}, {touch: []string{"a"}}},
		want:   rollout.Counts{Matched: 1},
		relist: []*corev1.Pod{trackedPod("a", "2", ss, true)},
	}, {
		name:  "a version the transform saw stays marked until the cache stores it",
		start: []*corev1.Pod{trackedPod("a", "1", ss, false)},
		steps: []step{
			{marks: map[string]mark{"a": {resourceVersion: "2"}}, cache: []*corev1.Pod{trackedPod("a", "1", ss, false)}, dirty: []string{"a"}},
			{cache: []*corev1.Pod{trackedPod("a", "2", ss, true)}},
		},
		want:   rollout.Counts{Matched: 1, Updated: 1},
		relist: []*corev1.Pod{trackedPod("a", "2", ss, true)},
	}, {
		name:  "a new pod the cache does not hold yet stays marked",
		start: []*corev1.Pod{trackedPod("a", "1", ss, true)},
		steps: []step{
			{marks: map[string]mark{"b": {resourceVersion: "3"}}, cache: []*corev1.Pod{trackedPod("a", "1", ss, true)}, dirty: []string{"b"}},
			{cache: []*corev1.Pod{trackedPod("a", "1", ss, true), trackedPod("b", "3", ss, false)}},
		},
		want:   rollout.Counts{Matched: 2, Updated: 1},
		relist: []*corev1.Pod{trackedPod("a", "1", ss, true), trackedPod("b", "3", ss, false)},
	}, {
		// The transform sees a deletion's final state as it sees an update; the Delete handler,
		// after the cache dropped the pod, lets absence meet the mark.
		name:  "a deletion is counted once the cache dropped the pod",
		start: []*corev1.Pod{trackedPod("a", "1", ss, true)},
		steps: []step{
			{marks: map[string]mark{"a": {resourceVersion: "2"}}, cache: []*corev1.Pod{trackedPod("a", "1", ss, true)}, dirty: []string{"a"}},
			{marks: map[string]mark{"a": {resourceVersion: "2", absent: true}}},
		},
		want: rollout.Counts{},
	}, {
		name:  "a handler's mark of an older version leaves a newer one in place",
		start: []*corev1.Pod{trackedPod("a", "1", ss, false)},
		steps: []step{
			{marks: map[string]mark{"a": {resourceVersion: "5"}}, cache: []*corev1.Pod{trackedPod("a", "1", ss, false)}, dirty: []string{"a"}},
			{marks: map[string]mark{"a": {resourceVersion: "1", absent: true}}, cache: []*corev1.Pod{trackedPod("a", "1", ss, false)}, dirty: []string{"a"}},
			{cache: []*corev1.Pod{trackedPod("a", "5", ss, true)}},
		},
		want:   rollout.Counts{Matched: 1, Updated: 1},
		relist: []*corev1.Pod{trackedPod("a", "5", ss, true)},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			_, _, _, _, ok, err := tr.settle(ss, nil)
			require.NoError(t, err)
			require.False(t, ok, "never counted")
			_, diff := tr.reset(ss, tc.start, "rev-1", 0, now)
			require.Zero(t, diff)
			var c rollout.Counts
			for i, st := range tc.steps {
				for _, name := range st.touch {
					tr.touch(key(name), mark{}, []string{ss.Name})
				}
				for name, m := range st.marks {
					tr.touch(key(name), m, []string{ss.Name})
				}
				if i == len(tc.steps)-1 && len(st.cache) == 0 && len(st.touch) > 0 {
					break // marked after the last settle
				}
				cache := map[types.NamespacedName]*corev1.Pod{}
				for _, p := range st.cache {
					cache[key(p.Name)] = p
				}
				c, _, _, _, ok, err = tr.settle(ss, func(k types.NamespacedName) (string, *counted, error) {
					p, found := cache[k]
					if !found {
						return "", nil, nil
					}
					return p.ResourceVersion, &counted{p.ResourceVersion, rollout.PodCounts(p, ss)}, nil
				})
				require.NoError(t, err)
				require.True(t, ok)
				var dirty []string
				for k := range tr.sets[ss.Name].dirty {
					dirty = append(dirty, k.Name)
				}
				assert.ElementsMatch(t, st.dirty, dirty, "step %d: the pods still marked", i)
			}
			if len(tc.steps) == 0 {
				c, _, _, _, ok, err = tr.settle(ss, nil)
				require.NoError(t, err)
				require.True(t, ok)
			}
			assert.Equal(t, tc.want, c)
			full, diff := tr.reset(ss, tc.relist, "rev-1", 0, now)
			assert.Equal(t, tc.differences, diff)
			assert.Equal(t, rollout.Status(ss, tc.relist, "", 0).MatchedPods, full.Matched, "reset counts every listed pod")
		})
	}
}

// A new version of the SidecarSet (its generation or hash annotations) makes the kept counts
// invalid: the next round counts in full, and nothing is compared across versions.
func TestTrackerVersion(t *testing.T) {
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "log", UID: "u", Generation: 1}}
	tr := newTracker()
	tr.reset(ss, nil, "rev-1", 0, time.Unix(0, 0))
	_, _, _, _, ok, err := tr.settle(ss, nil)
	require.NoError(t, err)
	require.True(t, ok)
	for _, change := range []func(*v1beta1.SidecarSet){
		func(s *v1beta1.SidecarSet) { s.Generation++ },
		func(s *v1beta1.SidecarSet) { s.Annotations = map[string]string{v1beta1.SidecarSetHashAnnotation: "h2"} },
	} {
		next := ss.DeepCopy()
		change(next)
		_, _, _, _, ok, err := tr.settle(next, nil)
		require.NoError(t, err)
		assert.False(t, ok)
	}
	selecting := ss.DeepCopy()
	selecting.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	tr.reset(selecting, nil, "rev-1", 0, time.Unix(0, 0))
	tr.namespacesChanged()
	_, _, _, _, ok, err = tr.settle(selecting, nil)
	require.NoError(t, err)
	assert.False(t, ok, "namespace labels changed")
}
