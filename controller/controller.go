package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

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

// reconcile is one round of compat §3.2 for ss, writing conds as its conditions.
func (r *Reconciler) reconcile(ctx context.Context, ss *v1beta1.SidecarSet, conds []metav1.Condition) (ctrl.Result, error) {
	logger := ctrllog.FromContext(ctx)
	settled, ok, err := r.settle(ctx, ss)
	if err != nil {
		return ctrl.Result{}, err
	}
	fresh := ok && r.now().Sub(settled.counted) < r.recountInterval()
	if fresh && !r.needsPods(ss, settled.counts) {
		status := settled.counts.Status(ss, settled.revision, settled.collisionCount)
		status.Conditions = conds
		if wait := r.countersWait(ss, status); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		if err := r.writeStatus(ctx, ss, status); err != nil {
			return ctrl.Result{}, fmt.Errorf("writing status: %w", err)
		}
		return ctrl.Result{RequeueAfter: r.recountInterval() - r.now().Sub(settled.counted)}, nil
	}
	if fresh && rollout.PlansFromCounts(ss) {
		return r.roundFromCounts(ctx, ss, conds, settled)
	}

	pods, err := r.matchingPods(ctx, ss)
	if err != nil {
		return ctrl.Result{}, err
	}
	latest, collisionCount, err := r.registerRevision(ctx, ss, pods)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("registering the latest ControllerRevision: %w", err)
	}
	var counts rollout.Counts
	if r.tr == nil {
		counts = rollout.CountPods(ss, pods)
	} else {
		var differences int
		counts, differences = r.tr.reset(ss, pods, latest, collisionCount, r.now())
		if differences > 0 {
			r.Metrics.recountDiffered(differences)
			logger.Error(nil, "pods counted differently from pod events than by a count of every pod; the count wins",
				"pods", differences, "kept", settled.counts, "counted", counts)
		}
	}
	status := counts.Status(ss, latest, collisionCount)
	status.Conditions = conds
	if err := r.writeStatus(ctx, ss, status); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing status: %w", err)
	}

	if waiting := r.exp.observe(ss.Name, pods); len(waiting) > 0 {
		logger.V(1).Info("waiting for the cache to show pods written in an earlier round", "pods", waiting)
		return ctrl.Result{RequeueAfter: requeueExpectations}, nil
	}
	return r.run(ctx, ss, rollout.NextRound(ss, pods), plannedFromEveryPod, counts, latest, collisionCount)
}

// roundFromCounts is a round during a rollout of a SidecarSet whose counts are kept from pod
// events: it reads the pods left to upgrade and those written in the last round, not every pod.
func (r *Reconciler) roundFromCounts(ctx context.Context, ss *v1beta1.SidecarSet, conds []metav1.Condition, s settled) (ctrl.Result, error) {
	status := s.counts.Status(ss, s.revision, s.collisionCount)
	status.Conditions = conds
	if err := r.writeStatus(ctx, ss, status); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing status: %w", err)
	}
	written, err := r.cachedPods(ctx, ss, r.exp.expected(ss.Name))
	if err != nil {
		return ctrl.Result{}, err
	}
	if waiting := r.exp.observe(ss.Name, written); len(waiting) > 0 {
		ctrllog.FromContext(ctx).V(1).Info("waiting for the cache to show pods written in an earlier round", "pods", waiting)
		return ctrl.Result{RequeueAfter: requeueExpectations}, nil
	}
	// Counted again now that the cache shows the last round's writes: counts settled before they
	// arrived would leave their pods out of the budget in use, and the round would take too many.
	s, ok, err := r.settle(ctx, ss)
	if err != nil {
		return ctrl.Result{}, err
	}
	keys, listed := r.tr.notUpdated(ss)
	if !ok || !listed {
		return ctrl.Result{RequeueAfter: requeueExpectations}, nil // to be counted in full first
	}
	candidates, err := r.cachedPods(ctx, ss, keys)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.run(ctx, ss, rollout.NextRoundOf(ss, candidates, s.counts), plannedFromKeptCounts, s.counts, s.revision, s.collisionCount)
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

// run carries out round for ss, planned from what plannedFrom says (Metrics.rolloutRounds), whose status
// counts were c with the revision decision latest and collisionCount: resets, or the upgrades the
// plan allows, then the status they give and the pods' SidecarSetUpgradable condition.
func (r *Reconciler) run(ctx context.Context, ss *v1beta1.SidecarSet, round rollout.Round, plannedFrom string, c rollout.Counts, latest string, collisionCount int32) (ctrl.Result, error) {
	switch {
	case round.Plan.Stopped == rollout.StoppedNotUpdate || round.Plan.Stopped == rollout.StoppedPaused:
		return ctrl.Result{}, nil
	case len(round.Reset) > 0:
		return ctrl.Result{}, r.forEachPod(ctx, round.Reset, func(ctx context.Context, pod *corev1.Pod) error {
			return r.reset(ctx, ss, pod)
		})
	case c.Updated >= c.Matched:
		return ctrl.Result{}, nil
	}
	r.Metrics.roundPlanned(plannedFrom)

	if err := r.markNotUpgradable(ctx, ss, round.Plan.NotUpgradable); err != nil {
		return ctrl.Result{}, err
	}
	if len(round.Plan.Upgrade) == 0 {
		r.explainWaiting(ss, round.Plan)
	}
	// Images first, all of them: the kubelet starts on each as soon as it is written. Then the
	// status those writes give, then the pods' SidecarSetUpgradable condition (OpenKruise writes
	// the condition after each pod's update; the order across pods is not observable).
	var (
		mu      sync.Mutex
		written = map[*corev1.Pod]*corev1.Pod{}
	)
	upgradeErr := r.forEachPod(ctx, round.Plan.Upgrade, func(ctx context.Context, pod *corev1.Pod) error {
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
		for _, p := range round.Plan.Upgrade {
			if w, ok := written[p]; ok {
				c = c.Sub(rollout.PodCounts(p, ss)).Add(rollout.PodCounts(w, ss))
				upgraded = append(upgraded, w)
			}
		}
		if err := r.writeStatus(ctx, ss, c.Status(ss, latest, collisionCount)); err != nil {
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

// explainWaiting records, when candidates wait, why (the issue: "the upgrade doesn't happen and I
// can't see why"). The events API aggregates repeats into a series.
func (r *Reconciler) explainWaiting(ss *v1beta1.SidecarSet, p rollout.Plan) {
	var why []string
	if n := len(p.HeldByMaxUnavailable); n > 0 {
		why = append(why, fmt.Sprintf("%d pod(s) wait for maxUnavailable (%d of %d in use by updated pods not yet ready, plus %d upgrading now)",
			n, p.Unavailable, p.MaxUnavailable, len(p.Upgrade)))
	}
	if n := len(p.HeldByPartition); n > 0 {
		why = append(why, fmt.Sprintf("%d pod(s) held back by partition %d", n, p.Partition))
	}
	if n := len(p.HeldBySelector); n > 0 {
		why = append(why, fmt.Sprintf("%d pod(s) not selected by updateStrategy.selector", n))
	}
	if n := len(p.InFlight); n > 0 {
		why = append(why, fmt.Sprintf("%d pod(s) still applying an earlier upgrade", n))
	}
	why = append(why, p.Warnings...)
	if len(why) > 0 {
		r.eventOnChange(&r.lastWaiting, ss, corev1.EventTypeNormal, ReasonRolloutWaiting, "Upgrade", strings.Join(why, "; "))
	}
}

// The reasons of the Events a rollout round records on its SidecarSet: why it waits, and the pods
// it skips (compat §3.6).
const (
	ReasonRolloutWaiting    = "RolloutWaiting"
	ReasonNotUpgradablePods = "NotUpgradablePods"
)

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

// markNotUpgradable sets the pods' SidecarSetUpgradable entry for ss to false and emits one
// NotUpgradablePods event for the round (compat §3.6), naming the pods and why.
func (r *Reconciler) markNotUpgradable(ctx context.Context, ss *v1beta1.SidecarSet, pods []rollout.NotUpgradable) error {
	if len(pods) == 0 {
		return nil
	}
	list := make([]*corev1.Pod, len(pods))
	for i := range pods {
		list[i] = pods[i].Pod
	}
	if err := r.forEachPod(ctx, list, func(ctx context.Context, pod *corev1.Pod) error {
		_, err := r.setUpgradable(ctx, ss, pod, false)
		return err
	}); err != nil {
		return err
	}
	if r.Recorder != nil {
		// The pods' revisions name the fields that changed; without them the reason names hashes.
		revs, _ := r.revisions(ctx, ss)
		r.Recorder.Eventf(ss, nil, corev1.EventTypeNormal, ReasonNotUpgradablePods, "Upgrade",
			"SidecarSet in-place update detected %d not upgradable pod(s) in this round, will skip them. First: %s/%s: %s",
			len(pods), pods[0].Pod.Namespace, pods[0].Pod.Name, rollout.ExplainNotUpgradable(pods[0].Pod, ss, revs))
	}
	return nil
}
