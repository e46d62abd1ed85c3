package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/managed"
	"github.com/sidecarops/sidecarops/controller/rollout"
)

// Name is the controller's name in logs, metrics and as the Events' reporting controller.
const Name = "sidecarset"

// requeueExpectations is how soon a round waiting for the cache to catch up is retried (compat §3.11).
const requeueExpectations = time.Second

// Reconciler reconciles one SidecarSet per request.
type Reconciler struct {
	// Client reads from the manager's informer cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server, for the fresh copy a conflicting write retries with.
	APIReader client.Reader
	// Namespace holds the SidecarSets' ControllerRevisions (the manager's own, compat §1.10).
	Namespace string
	Recorder  events.EventRecorder
	// Now is the clock written into pod annotations and conditions; time.Now when nil.
	Now func() time.Time
	// PodWriters bounds the pods of one round written concurrently (default 16).
	PodWriters int
	// Conflicts, when set, reports collisions with other SidecarSets that got past admission
	// (decision D7): the Conflict condition, an Event, metrics.
	Conflicts ConflictFinder
	// RecountInterval is how often a SidecarSet whose status is kept from pod events is counted
	// over all its pods again, and the two compared (default 5 minutes).
	RecountInterval time.Duration
	// Metrics records what the controller does (NewMetrics); nil records nothing.
	Metrics *Metrics
	// Pods is the pod cache the manager's cache was built with (its NewInformer); SetupWithManager
	// requires it.
	Pods *Pods

	exp *expectations
	// tr keeps the status counts from pod events (Pods', set by SetupWithManager; without it every
	// round counts every pod).
	tr *tracker
	// indexed: the pod cache has the podsBySidecarSet index.
	indexed   bool
	conflicts *conflicts
	// lastWaiting is the last RolloutWaiting message per SidecarSet (string by string).
	lastWaiting sync.Map
	// statusWritten is when each SidecarSet's status was last written (string by time.Time).
	statusWritten sync.Map
	// lastCustomVersion is the last InvalidCustomVersion message per SidecarSet (string by string).
	lastCustomVersion sync.Map
}

// SetupWithManager registers the controller: SidecarSets (creation, deletion, spec changes —
// status and metadata updates do not change the generation), and pods through podEvents. It runs
// only on the elected leader, like every controller-runtime controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if r.Namespace == "" {
		return errors.New("controller: Reconciler.Namespace is required")
	}
	if r.exp == nil {
		r.exp = newExpectations()
	}
	if workers <= 0 {
		workers = 3
	}
	r.conflicts = newConflicts(r.Metrics)
	if r.Pods == nil {
		return errors.New("controller: Reconciler.Pods is required")
	}
	r.tr = r.Pods.tr
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podsBySidecarSet, injectedBy); err != nil {
		return fmt.Errorf("indexing pods by SidecarSet: %w", err)
	}
	// Indexing made the pod informer: without Pods.NewInformer no pod version would be marked.
	if !r.Pods.made.Load() {
		return errors.New("controller: the manager's cache must build informers with Reconciler.Pods.NewInformer")
	}
	r.indexed = true
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1beta1.SidecarSet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, podEvents{get: cachedSidecarSets(mgr.GetCache()), exp: r.exp, tr: r.tr}).
		Watches(&corev1.Namespace{}, namespaceEvents{r.tr}).
		WatchesRawSource(source.Channel(r.conflicts.enqueue, &handler.TypedEnqueueRequestForObject[*v1beta1.SidecarSet]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// requeueConflicts is how soon a SidecarSet the policy state does not hold yet is checked for
// collisions again: a debounced compile away.
const requeueConflicts = 500 * time.Millisecond

// Reconcile runs compat §3.2 for one SidecarSet, and reports its collisions with others.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.exp == nil {
		r.exp = newExpectations()
	}
	ss := &v1beta1.SidecarSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, ss); err != nil {
		if apierrors.IsNotFound(err) {
			r.exp.forget(req.Name)
			r.tr.forget(req.Name)
			r.lastWaiting.Delete(req.Name)
			r.statusWritten.Delete(req.Name)
			r.lastCustomVersion.Delete(req.Name)
			r.forgetConflicts(ctx, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	conds, pending, err := r.conflictCondition(ctx, ss)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("checking for collisions with other SidecarSets: %w", err)
	}
	res, err := r.reconcile(ctx, ss, conds)
	if pending && (res.RequeueAfter == 0 || res.RequeueAfter > requeueConflicts) {
		res.RequeueAfter = requeueConflicts
	}
	return res, err
}

// reconcile is one round of compat §3.2 for ss, writing conds as its conditions: it reads what the
// round needs (view), asks rollout.Decide what to do, writes the status and, unless the round
// waits, does the rest.
func (r *Reconciler) reconcile(ctx context.Context, ss *v1beta1.SidecarSet, conds []metav1.Condition) (ctrl.Result, error) {
	v, err := r.view(ctx, ss)
	if err != nil {
		return ctrl.Result{}, err
	}
	a := rollout.Decide(ss, v.view, v.history)
	status := a.Status
	status.Conditions = conds
	if v.plannedFrom == "" {
		// Counters only: writes of a scale-up's counters are batched.
		if wait := r.countersWait(ss, status); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	if err := r.writeStatus(ctx, ss, status); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing status: %w", err)
	}
	if v.plannedFrom == "" || v.wait {
		return ctrl.Result{RequeueAfter: v.requeue}, nil
	}
	return r.execute(ctx, ss, a, v.plannedFrom)
}

// roundView is what a round read of ss's pods: a view to decide from, the revision decision, where
// the view came from (Metrics.rolloutRounds; "" for counts alone, with nothing to plan), and
// whether the round stops once the status is written (wait: the cache has not shown an earlier
// round's writes yet, or the pods are to be counted in full first), to run again after requeue.
type roundView struct {
	view        rollout.View
	history     rollout.History
	plannedFrom string
	wait        bool
	requeue     time.Duration
}

// view reads what this round of ss needs, in one of three ways: the counts kept from pod events
// alone, when they are fresh and nothing is to be planned; those counts with the pods left to
// upgrade, during a rollout that rollout.PlansFromCounts allows; or every managed pod, counted in
// full and checked against the kept counts, with the ControllerRevisions registered.
func (r *Reconciler) view(ctx context.Context, ss *v1beta1.SidecarSet) (roundView, error) {
	s, ok, err := r.settle(ctx, ss)
	if err != nil {
		return roundView{}, err
	}
	fresh := ok && r.now().Sub(s.counted) < r.recountInterval()
	switch {
	case fresh && !r.needsPods(ss, s.counts):
		return roundView{view: rollout.KeptCounts{Counts: s.counts}, history: s.history(), requeue: r.recountInterval() - r.now().Sub(s.counted)}, nil
	case fresh && rollout.PlansFromCounts(ss):
		return r.keptCountsView(ctx, ss, s)
	}
	pods, err := r.matchingPods(ctx, ss)
	if err != nil {
		return roundView{}, err
	}
	latest, collisionCount, err := r.registerRevision(ctx, ss, pods)
	if err != nil {
		return roundView{}, fmt.Errorf("registering the latest ControllerRevision: %w", err)
	}
	if r.tr != nil {
		if counts, differences := r.tr.reset(ss, pods, latest, collisionCount, r.now()); differences > 0 {
			r.Metrics.recountDiffered(differences)
			ctrllog.FromContext(ctx).Error(nil, "pods counted differently from pod events than by a count of every pod; the count wins",
				"pods", differences, "kept", s.counts, "counted", counts)
		}
	}
	v := roundView{view: rollout.EveryPod(pods), history: rollout.History{Latest: latest, CollisionCount: collisionCount}, plannedFrom: plannedFromEveryPod}
	// As OpenKruise: the status first, then the wait for the cache (compat §3.2 steps 4 and 5).
	if r.waitingForCache(ctx, ss, pods) {
		v.wait, v.requeue = true, requeueExpectations
		return v, nil
	}
	v.history.Revisions = r.revisionsToExplain(ctx, ss)
	return v, nil
}

// keptCountsView is the view of a round during a rollout of a SidecarSet whose counts, s, are kept
// from pod events: it reads the pods left to upgrade and those written in the last round, not every
// pod. Until the cache shows that round's writes, the round writes the status of s and waits.
func (r *Reconciler) keptCountsView(ctx context.Context, ss *v1beta1.SidecarSet, s settled) (roundView, error) {
	waiting := roundView{view: rollout.KeptCounts{Counts: s.counts}, history: s.history(), plannedFrom: plannedFromKeptCounts, wait: true, requeue: requeueExpectations}
	written, err := r.cachedPods(ctx, ss, r.exp.expected(ss.Name))
	if err != nil {
		return roundView{}, err
	}
	if r.waitingForCache(ctx, ss, written) {
		return waiting, nil
	}
	// Counted again now that the cache shows the last round's writes: counts settled before they
	// arrived would leave their pods out of the budget in use, and the round would take too many.
	s, ok, err := r.settle(ctx, ss)
	if err != nil {
		return roundView{}, err
	}
	keys, listed := r.tr.notUpdated(ss)
	if !ok || !listed {
		return waiting, nil // to be counted in full first
	}
	candidates, err := r.cachedPods(ctx, ss, keys)
	if err != nil {
		return roundView{}, err
	}
	h := s.history()
	h.Revisions = r.revisionsToExplain(ctx, ss)
	return roundView{view: rollout.KeptCounts{Counts: s.counts, NotUpdated: candidates}, history: h, plannedFrom: plannedFromKeptCounts}, nil
}

// waitingForCache reports whether pods written in an earlier round of ss are not yet shown by the
// cache as written (among pods, read from it): a round planned now could upgrade them twice.
func (r *Reconciler) waitingForCache(ctx context.Context, ss *v1beta1.SidecarSet, pods []*corev1.Pod) bool {
	waiting := r.exp.observe(ss.Name, pods)
	if len(waiting) > 0 {
		ctrllog.FromContext(ctx).V(1).Info("waiting for the cache to show pods written in an earlier round", "pods", waiting)
	}
	return len(waiting) > 0
}

// revisionsToExplain reads ss's ControllerRevisions from the cache, for a round's Event that names
// the fields a pod that cannot be upgraded in place changed; unreadable, or with no Events recorded,
// the Event names hashes instead.
func (r *Reconciler) revisionsToExplain(ctx context.Context, ss *v1beta1.SidecarSet) func() []*appsv1.ControllerRevision {
	return func() []*appsv1.ControllerRevision {
		if r.Recorder == nil {
			return nil
		}
		revs, _ := r.revisions(ctx, ss)
		return revs
	}
}

// cachedPods reads the pods named by keys that ss manages from the cache, in the order of keys; a
// pod that is gone is left out.
func (r *Reconciler) cachedPods(ctx context.Context, ss *v1beta1.SidecarSet, keys []types.NamespacedName) ([]*corev1.Pod, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	managed, err := managed.Filter(ctx, r.Client, ss)
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(keys))
	for _, key := range keys {
		pod := &corev1.Pod{}
		if err := r.Client.Get(ctx, key, pod, client.UnsafeDisableDeepCopy); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("reading pod %s: %w", key, err)
		}
		if ok, err := managed(pod); err != nil {
			return nil, err
		} else if ok {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// execute carries out a, planned from what plannedFrom says (Metrics.rolloutRounds): resets, or
// the upgrades, conditions and Events of a round of the rollout, then the status the upgrades give.
func (r *Reconciler) execute(ctx context.Context, ss *v1beta1.SidecarSet, a rollout.Actions, plannedFrom string) (ctrl.Result, error) {
	if len(a.Reset) > 0 {
		return ctrl.Result{}, r.forEachPod(ctx, a.Reset, func(ctx context.Context, pod *corev1.Pod) error {
			return r.reset(ctx, ss, pod)
		})
	}
	if !a.Rolling {
		return ctrl.Result{}, nil
	}
	r.Metrics.roundPlanned(plannedFrom)

	if err := r.forEachPod(ctx, notUpgradablePods(a.NotUpgradable), func(ctx context.Context, pod *corev1.Pod) error {
		_, err := r.setUpgradable(ctx, ss, pod, false)
		return err
	}); err != nil {
		return ctrl.Result{}, err
	}
	for _, e := range a.Events {
		r.record(ss, e)
	}
	// Images first, all of them: the kubelet starts on each as soon as it is written. Then the
	// status those writes give, then the pods' SidecarSetUpgradable condition (OpenKruise writes
	// the condition after each pod's update; the order across pods is not observable).
	var (
		mu      sync.Mutex
		written = map[*corev1.Pod]*corev1.Pod{}
	)
	upgradeErr := r.forEachPod(ctx, a.Upgrade, func(ctx context.Context, pod *corev1.Pod) error {
		next, err := r.upgrade(ctx, ss, pod)
		if next != nil {
			mu.Lock()
			written[pod] = next
			mu.Unlock()
		}
		return err
	})
	if len(written) > 0 {
		ctrllog.FromContext(ctx).V(1).Info("upgraded pods in place", "pods", len(written))
		upgraded := make([]*corev1.Pod, 0, len(written))
		for _, p := range a.Upgrade {
			if w, ok := written[p]; ok {
				upgraded = append(upgraded, w)
			}
		}
		if err := r.writeStatus(ctx, ss, a.StatusAfter(ss, written)); err != nil {
			upgradeErr = errors.Join(upgradeErr, fmt.Errorf("writing status: %w", err))
		}
		// A quarter of the writers: the kubelets are reporting the new images meanwhile, and the
		// rollout is done when they have, not when the conditions are.
		upgradeErr = errors.Join(upgradeErr, forEach(ctx, upgraded, max(1, r.podWriters()/4), func(ctx context.Context, pod *corev1.Pod) error {
			_, err := r.setUpgradable(ctx, ss, pod, true)
			return err
		}))
	}
	return ctrl.Result{}, upgradeErr
}

func notUpgradablePods(nu []rollout.NotUpgradable) []*corev1.Pod {
	out := make([]*corev1.Pod, len(nu))
	for i := range nu {
		out[i] = nu[i].Pod
	}
	return out
}

// matchingPods lists the pods ss manages (compat §3.3) from the cache: with the podsBySidecarSet
// index, only the pods that list ss as injected are read.
func (r *Reconciler) matchingPods(ctx context.Context, ss *v1beta1.SidecarSet) ([]*corev1.Pod, error) {
	if !r.indexed {
		return managed.Pods(ctx, r.Client, ss)
	}
	managed, err := managed.Filter(ctx, r.Client, ss)
	if err != nil {
		return nil, err
	}
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.MatchingFields{podsBySidecarSet: ss.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the pods injected by %s: %w", ss.Name, err)
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if ok, err := managed(p); err != nil {
			return nil, err
		} else if ok {
			pods = append(pods, p)
		}
	}
	// The index lists in no particular order; a round's ties are broken by this one, as the rounds
	// planned from the pods left to upgrade break them (tracker.notUpdated).
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return pods, nil
}

// settled are a SidecarSet's counts kept from pod events, brought up to date.
type settled struct {
	counts         rollout.Counts
	revision       string
	collisionCount int32
	counted        time.Time
}

// history is the revision decision recorded with the counts.
func (s settled) history() rollout.History {
	return rollout.History{Latest: s.revision, CollisionCount: s.collisionCount}
}

// settle brings ss's counts kept from pod events up to date, counting the pods that changed since
// the last round; ok is false when there are none valid for ss as it is now.
func (r *Reconciler) settle(ctx context.Context, ss *v1beta1.SidecarSet) (settled, bool, error) {
	if r.tr == nil {
		return settled{}, false, nil
	}
	managed, err := managed.Filter(ctx, r.Client, ss)
	if err != nil {
		return settled{}, false, err
	}
	c, revision, collisionCount, at, ok, err := r.tr.settle(ss, func(key types.NamespacedName) (string, *counted, error) {
		var pod corev1.Pod
		if err := r.Client.Get(ctx, key, &pod, client.UnsafeDisableDeepCopy); apierrors.IsNotFound(err) {
			return "", nil, nil
		} else if err != nil {
			return "", nil, fmt.Errorf("reading pod %s: %w", key, err)
		}
		if ok, err := managed(&pod); err != nil || !ok {
			return pod.ResourceVersion, nil, err
		}
		return pod.ResourceVersion, &counted{pod.ResourceVersion, rollout.PodCounts(&pod, ss)}, nil
	})
	return settled{c, revision, collisionCount, at}, ok, err
}

// needsPods reports whether a round must read ss's pods, rather than only keep its status from
// counts: a rollout in progress (or not started), upgrades awaited in the cache, or a hot-upgrade
// twin possibly awaiting its reset.
func (r *Reconciler) needsPods(ss *v1beta1.SidecarSet, c rollout.Counts) bool {
	return c.Updated < c.Matched || r.exp.pending(ss.Name) || rollout.HotUpgrades(ss)
}

func (r *Reconciler) recountInterval() time.Duration {
	if r.RecountInterval > 0 {
		return r.RecountInterval
	}
	return 5 * time.Minute
}

// writeStatus writes status through the status subresource when it differs from ss's, and keeps
// ss current (status and resourceVersion) so a round can write again. A conflict is returned (and
// the request retried) rather than overwritten: the next round recomputes the status anyway.
func (r *Reconciler) writeStatus(ctx context.Context, ss *v1beta1.SidecarSet, status v1beta1.SidecarSetStatus) error {
	if rollout.StatusEqual(ss.Status, status) {
		return nil
	}
	clone := ss.DeepCopy()
	clone.Status = status
	if err := r.Client.Status().Update(ctx, clone); err != nil {
		return err
	}
	ss.Status, ss.ResourceVersion = status, clone.ResourceVersion
	r.statusWritten.Store(ss.Name, time.Now())
	return nil
}

// countersBatch is the least time between two status writes of a SidecarSet that change only its
// pod counters while no rollout is in progress: a scale-up of thousands of pods reports its
// progress twice a second, not once per pod turning ready (each write is also a watch event for
// every client of SidecarSets). A rollout's rounds are not held back: they write at once.
const countersBatch = 500 * time.Millisecond

// countersWait is how long status must wait before it is written, 0 when at once: when it differs
// from ss's only in the pod counters and ss's status was written less than countersBatch ago.
// The wall clock is used, not r.Now, which tests fix.
func (r *Reconciler) countersWait(ss *v1beta1.SidecarSet, status v1beta1.SidecarSetStatus) time.Duration {
	last, ok := r.statusWritten.Load(ss.Name)
	if !ok || rollout.StatusEqual(ss.Status, status) {
		return 0
	}
	counters := ss.Status
	counters.MatchedPods, counters.UpdatedPods, counters.ReadyPods, counters.UpdatedReadyPods =
		status.MatchedPods, status.UpdatedPods, status.ReadyPods, status.UpdatedReadyPods
	if !rollout.StatusEqual(counters, status) {
		return 0
	}
	return max(0, countersBatch-time.Since(last.(time.Time)))
}

// forEachPod runs write on pods with at most PodWriters at a time.
func (r *Reconciler) forEachPod(ctx context.Context, pods []*corev1.Pod, write func(context.Context, *corev1.Pod) error) error {
	return forEach(ctx, pods, r.podWriters(), write)
}

func (r *Reconciler) podWriters() int {
	if r.PodWriters <= 0 {
		return 16
	}
	return r.PodWriters
}

// forEach runs write on pods with at most n at a time and returns every error.
func forEach(ctx context.Context, pods []*corev1.Pod, n int, write func(context.Context, *corev1.Pod) error) error {
	sem := make(chan struct{}, n)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, pod := range pods {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := write(ctx, pod); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// eventOnChange records msg as an Event of ss unless it is the last one last holds for ss: every
// pod event reconciles, so a reason is said again only when it changes.
func (r *Reconciler) eventOnChange(last *sync.Map, ss *v1beta1.SidecarSet, kind, reason, action, msg string) {
	if r.Recorder == nil {
		return
	}
	if prev, ok := last.Load(ss.Name); ok && prev == msg {
		return
	}
	last.Store(ss.Name, msg)
	r.Recorder.Eventf(ss, nil, kind, reason, action, "%s", msg)
}

// record records e on ss. Why a rollout waits is said again only when it changes: every pod event
// reconciles.
func (r *Reconciler) record(ss *v1beta1.SidecarSet, e rollout.Event) {
	if e.Reason == rollout.ReasonRolloutWaiting {
		r.eventOnChange(&r.lastWaiting, ss, e.Type, e.Reason, e.Action, e.Message)
		return
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(ss, nil, e.Type, e.Reason, e.Action, "%s", e.Message)
	}
}
