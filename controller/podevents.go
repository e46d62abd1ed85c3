package controller

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/rollout"
)

// podEvents maps pod events to the SidecarSets that manage the pod (compat §3.1): those named in its
// kruise.io/sidecarset-injected-list that exist and whose containers the pod has.
type podEvents struct {
	// get reads a SidecarSet from the informer cache.
	get func(ctx context.Context, name string) (*v1beta1.SidecarSet, bool)
	exp *expectations
	// tr hears what the pod informer's transform cannot tell it (Update, Delete).
	tr *tracker
}

// cachedSidecarSets reads SidecarSets through r, a missing or unreadable one as absent: there is
// nothing to reconcile for it. The SidecarSets returned are the cache's own: callers only read them.
func cachedSidecarSets(r client.Reader) func(context.Context, string) (*v1beta1.SidecarSet, bool) {
	return func(ctx context.Context, name string) (*v1beta1.SidecarSet, bool) {
		ss := &v1beta1.SidecarSet{}
		// Read only, once per pod event and SidecarSet: not worth a deep copy of the SidecarSet.
		if err := r.Get(ctx, client.ObjectKey{Name: name}, ss, client.UnsafeDisableDeepCopy); err != nil {
			return nil, false
		}
		return ss, true
	}
}

var _ handler.EventHandler = podEvents{}

// createBatch delays the reconcile a pod creation asks for, so that a scale-up of many pods costs
// one reconcile (a list of all of the SidecarSet's pods) rather than one per pod. A new pod runs
// the SidecarSet's current sidecars; nothing waits on it but matchedPods.
const createBatch = 500 * time.Millisecond

func (h podEvents) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	pod, ok := e.Object.(*corev1.Pod)
	if !ok {
		return
	}
	for _, ss := range h.sidecarSets(ctx, pod) {
		q.AddAfter(request(ss.Name), createBatch)
	}
}

func (h podEvents) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	old, ok1 := e.ObjectOld.(*corev1.Pod)
	pod, ok2 := e.ObjectNew.(*corev1.Pod)
	if !ok1 || !ok2 || old.ResourceVersion == pod.ResourceVersion {
		return
	}
	// The transform marked the new version for the SidecarSets it names; those only the old one
	// named count the pod no more.
	names := injectedBy(pod)
	if left := slices.DeleteFunc(injectedBy(old), func(name string) bool { return slices.Contains(names, name) }); len(left) > 0 {
		h.tr.touch(client.ObjectKeyFromObject(pod), mark{}, left)
	}
	for _, ss := range h.sidecarSets(ctx, pod) {
		switch {
		case !podChangeMatters(old, pod, ss):
		case countersOnly(old, pod, ss):
			q.AddAfter(request(ss.Name), createBatch)
		default:
			q.Add(request(ss.Name))
		}
	}
}

// countersOnly reports whether the change of pod can move nothing but ss's status counters: a pod
// on ss's hash turning ready or not, or consistent or not, while ss rolls nothing out (its status
// counts every pod updated, for its current generation) and has no hot upgrade (whose twins are
// reset on such a change). Such changes are batched as creations are: a scale-up's pods turning
// ready cost one round per batch, not one each. During a rollout every change goes at once, since
// a pod turning ready frees the budget for the next batch.
func countersOnly(old, pod *corev1.Pod, ss *v1beta1.SidecarSet) bool {
	st := ss.Status
	switch {
	case st.ObservedGeneration != ss.Generation || st.UpdatedPods != st.MatchedPods || rollout.HotUpgrades(ss):
		return false
	case old.DeletionTimestamp == nil && pod.DeletionTimestamp != nil:
		return false
	case rollout.PodHash(old, ss.Name) != rollout.PodHash(pod, ss.Name) || !rollout.IsUpdated(pod, ss):
		return false
	}
	return true
}

// Delete enqueues too (OpenKruise only clears expectations, quirk Q16): matchedPods must drop.
func (h podEvents) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	pod, ok := e.Object.(*corev1.Pod)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(pod)
	h.exp.forgetPod(key)
	// The transform cannot tell a deletion from an update, and never sees a deletion found by
	// relisting: the pod's mark is met by its absence too.
	h.tr.touch(key, mark{resourceVersion: pod.ResourceVersion, absent: true}, injectedBy(pod))
	for _, ss := range h.sidecarSets(ctx, pod) {
		q.Add(request(ss.Name))
	}
}

func (h podEvents) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

// podChangeMatters is compat §3.1's update filter for one SidecarSet, plus a change of the pod's
// hash for it (the write of an upgrade reaching the cache, after which the next batch may go).
func podChangeMatters(old, pod *corev1.Pod, ss *v1beta1.SidecarSet) bool {
	switch {
	case old.DeletionTimestamp == nil && pod.DeletionTimestamp != nil:
		return true
	case isReady(old) != isReady(pod):
		return true
	case rollout.IsPodStateConsistent(old, ss, nil) != rollout.IsPodStateConsistent(pod, ss, nil):
		return true
	case rollout.PodHash(old, ss.Name) != rollout.PodHash(pod, ss.Name):
		return true
	case ss.Spec.UpdateStrategy.Selector != nil && !apiequality.Semantic.DeepEqual(old.Labels, pod.Labels):
		return true
	}
	return false
}

func isReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (h podEvents) sidecarSets(ctx context.Context, pod *corev1.Pod) []*v1beta1.SidecarSet {
	list := pod.Annotations[v1beta1.SidecarSetListAnnotation]
	if list == "" {
		return nil
	}
	var out []*v1beta1.SidecarSet
	for _, name := range strings.Split(list, ",") {
		if ss, ok := h.get(ctx, name); ok && rollout.HasSidecarContainers(pod, ss) {
			out = append(out, ss)
		}
	}
	return out
}

func request(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
}
