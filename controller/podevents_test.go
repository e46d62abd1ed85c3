package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/rollout"
)

func testSidecarSet(name string) *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{Containers: []v1beta1.SidecarContainer{
			{Container: corev1.Container{Name: "test-sidecar", Image: "test-image:v2"}},
		}},
	}
}

// injectedPod is Pd of compat §4.6: Running & Ready, injected by list, with the sidecar container.
func injectedPod(list string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "test-pod-1", Namespace: "default", ResourceVersion: "1",
			Labels:      map[string]string{"app": "nginx"},
			Annotations: map[string]string{v1beta1.SidecarSetListAnnotation: list}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "nginx", Image: "nginx:1.15.1"},
			{Name: "test-sidecar", Image: "test-image:v1"},
		}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "nginx", Image: "nginx:1.15.1", ImageID: "nginx-id", Ready: true},
				{Name: "test-sidecar", Image: "test-image:v1", ImageID: "v1-id", Ready: true},
			},
		},
	}
}

func handlerWith(sets ...*v1beta1.SidecarSet) podEvents {
	byName := map[string]*v1beta1.SidecarSet{}
	for _, ss := range sets {
		byName[ss.Name] = ss
	}
	return podEvents{
		get: func(_ context.Context, name string) (*v1beta1.SidecarSet, bool) {
			ss, ok := byName[name]
			return ss, ok
		},
		exp: newExpectations(),
	}
}

// recordingQueue records what the handler enqueues, at once or after a delay.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added   []string
	delayed map[string]time.Duration
}

func (q *recordingQueue) Add(r reconcile.Request) { q.added = append(q.added, r.Name) }

func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.added = append(q.added, r.Name)
	q.delayed[r.Name] = d
}

func newQueue() *recordingQueue {
	return &recordingQueue{delayed: map[string]time.Duration{}}
}

func queued(q *recordingQueue) []string { return q.added }

// hotTwins gives p the two containers of a hot-upgraded test-sidecar instead of the one.
func hotTwins(p *corev1.Pod) *corev1.Pod {
	first, second := rollout.HotUpgradeNames("test-sidecar")
	p.Spec.Containers[1].Name = first
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: second, Image: "empty:1"})
	p.Annotations[v1beta1.SidecarSetWorkingHotUpgradeContainer] = `{"test-sidecar":"` + first + `"}`
	return p
}

// C21: the pod's injected-list names the SidecarSets; missing ones are skipped.
func TestCreateEnqueuesInjectedSidecarSetsC21(t *testing.T) {
	h := handlerWith(testSidecarSet("test-sidecarset-1"), testSidecarSet("test-sidecarset-2"), testSidecarSet("test-sidecarset-3"))
	for _, tc := range []struct {
		list string
		want []string
	}{
		{"test-sidecarset-2", []string{"test-sidecarset-2"}},
		{"test-sidecarset-1,test-sidecarset-3", []string{"test-sidecarset-1", "test-sidecarset-3"}},
		{"test-sidecarset-4", nil},
		{"", nil},
	} {
		q := newQueue()
		h.Create(context.Background(), event.CreateEvent{Object: injectedPod(tc.list)}, q)
		assert.ElementsMatch(t, tc.want, queued(q), "injected-list %q", tc.list)
		for _, name := range tc.want {
			assert.Equal(t, createBatch, q.delayed[name], "creations are batched")
		}
	}

	// A SidecarSet whose containers the pod lacks does not manage it.
	other := testSidecarSet("other")
	other.Spec.Containers[0].Name = "not-in-pod"
	q := newQueue()
	handlerWith(other).Create(context.Background(), event.CreateEvent{Object: injectedPod("other")}, q)
	assert.Empty(t, queued(q))
}

// C20 and the deliberate differences of this controller (docs/operations.md).
func TestUpdateAndDeleteEventsC20(t *testing.T) {
	selectorSet := testSidecarSet("test-sidecarset")
	selectorSet.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
	for _, tc := range []struct {
		name    string
		ss      *v1beta1.SidecarSet
		change  func(*corev1.Pod)
		enqueue bool
	}{
		{"Ready flips", nil, func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }, true},
		{"only an app container image changes", nil, func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:2" }, false},
		{"deletion starts", nil, func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }, true},
		{"sidecar consistency flips", nil, func(p *corev1.Pod) {
			p.Spec.Containers[1].Image = "test-image:v2"
			p.Annotations[v1beta1.SidecarSetInplaceUpdateStateAnnotation] = `{"test-sidecarset":{"revision":"x","updateTimestamp":null,"lastContainerStatuses":{"test-sidecar":{"imageID":"v1-id"}}}}`
		}, true},
		{"the pod's hash for the SidecarSet changes", nil, func(p *corev1.Pod) {
			p.Annotations[v1beta1.SidecarSetHashAnnotation] = `{"test-sidecarset":{"hash":"new"}}`
		}, true},
		{"labels change without updateStrategy.selector", nil, func(p *corev1.Pod) { p.Labels["canary"] = "true" }, false},
		{"labels change with updateStrategy.selector", selectorSet, func(p *corev1.Pod) { p.Labels["canary"] = "true" }, true},
		{"same resourceVersion (resync)", nil, func(p *corev1.Pod) {
			p.Status.Conditions[0].Status = corev1.ConditionFalse
			p.ResourceVersion = "1"
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := tc.ss
			if ss == nil {
				ss = testSidecarSet("test-sidecarset")
			}
			old := injectedPod("test-sidecarset")
			pod := old.DeepCopy()
			pod.ResourceVersion = "2"
			tc.change(pod)
			q := newQueue()
			handlerWith(ss).Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: pod}, q)
			if tc.enqueue {
				assert.Equal(t, []string{"test-sidecarset"}, queued(q))
			} else {
				assert.Empty(t, queued(q))
			}
		})
	}

	// Outside a rollout, a pod on the SidecarSet's hash turning ready or not moves only the status
	// counters: batched as creations are. During one, or for a pod not updated, at once.
	idle := func(mutate ...func(*v1beta1.SidecarSet)) *v1beta1.SidecarSet {
		ss := testSidecarSet("test-sidecarset")
		ss.Generation, ss.Annotations = 2, map[string]string{v1beta1.SidecarSetHashAnnotation: "h2"}
		ss.Status = v1beta1.SidecarSetStatus{ObservedGeneration: 2, MatchedPods: 5, UpdatedPods: 5}
		for _, m := range mutate {
			m(ss)
		}
		return ss
	}
	onHash := func(h string) *corev1.Pod {
		p := injectedPod("test-sidecarset")
		p.Annotations[v1beta1.SidecarSetHashAnnotation] = `{"test-sidecarset":{"hash":"` + h + `"}}`
		return p
	}
	for _, tc := range []struct {
		name    string
		ss      *v1beta1.SidecarSet
		pod     *corev1.Pod
		delayed bool
	}{
		{"no rollout, pod updated: batched", idle(), onHash("h2"), true},
		{"a rollout in progress: at once", idle(func(ss *v1beta1.SidecarSet) { ss.Status.UpdatedPods = 4 }), onHash("h2"), false},
		{"a generation not observed yet: at once", idle(func(ss *v1beta1.SidecarSet) { ss.Generation = 3 }), onHash("h2"), false},
		{"the pod not updated: at once", idle(), onHash("h1"), false},
		{"hot upgrades: at once", idle(func(ss *v1beta1.SidecarSet) {
			ss.Spec.Containers[0].UpgradeStrategy.UpgradeType = v1beta1.SidecarContainerHotUpgrade
		}), hotTwins(onHash("h2")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod.DeepCopy()
			pod.ResourceVersion = "2"
			pod.Status.Conditions[0].Status = corev1.ConditionFalse
			q := newQueue()
			handlerWith(tc.ss).Update(context.Background(), event.UpdateEvent{ObjectOld: tc.pod, ObjectNew: pod}, q)
			assert.Equal(t, []string{"test-sidecarset"}, queued(q))
			if tc.delayed {
				assert.Equal(t, createBatch, q.delayed["test-sidecarset"])
			} else {
				assert.NotContains(t, q.delayed, "test-sidecarset")
			}
		})
	}

	// Deletion enqueues (OpenKruise does not: quirk Q16) and forgets the pod's expectations.
	h := handlerWith(testSidecarSet("test-sidecarset"))
	key := types.NamespacedName{Namespace: "default", Name: "test-pod-1"}
	h.exp.expect("test-sidecarset", key, "5")
	q := newQueue()
	h.Delete(context.Background(), event.DeleteEvent{Object: injectedPod("test-sidecarset")}, q)
	assert.Equal(t, []string{"test-sidecarset"}, queued(q))
	assert.Empty(t, h.exp.observe("test-sidecarset", []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "test-pod-1", ResourceVersion: "1"}}}))
}
