package controller

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
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

// podsBySidecarSet is the pod cache's index of the SidecarSets named in each pod's
// kruise.io/sidecarset-injected-list: a SidecarSet's managed pods are among those it lists, so a
// round reads them without scanning every pod of its namespaces.
const podsBySidecarSet = "sidecarops.io/injected-by"

// injectedBy is the podsBySidecarSet index function.
func injectedBy(o client.Object) []string {
	list := o.GetAnnotations()[v1beta1.SidecarSetListAnnotation]
	if list == "" {
		return nil
	}
	return strings.Split(list, ",")
}

// tracker keeps each SidecarSet's status counts as the sum of its pods' rollout.PodCounts, and the
// pods whose events arrived since its last round (dirty). A round that finds its counts valid for
// the SidecarSet as it is now recounts only the dirty pods: a pod event costs work for that pod,
// not for every pod of the SidecarSet. The counts are valid for one version of the SidecarSet
// (its generation and annotations, which carry the hashes) and, when it selects namespaces by
// label, one version of the Namespaces' labels; any other version is counted in full again.
type tracker struct {
	mu   sync.Mutex
	sets map[string]*tracked
	// nsEpoch moves whenever a Namespace's labels change.
	nsEpoch uint64
}

type tracked struct {
	version trackedVersion
	pods    map[types.NamespacedName]counted
	counts  rollout.Counts
	// notUpdated are the counted pods not on the SidecarSet's hash: a rollout's candidates, from
	// which its rounds are planned (rollout.NextRoundOf) without reading the other pods.
	notUpdated map[types.NamespacedName]struct{}
	dirty      map[types.NamespacedName]mark
	// counted is when the counts were last computed over every pod.
	counted time.Time
	// revision and collisionCount are the revision decision for version.
	revision       string
	collisionCount int32
}

// counted is what one pod, at one resourceVersion, adds to the counts.
type counted struct {
	resourceVersion string
	counts          rollout.Counts
}

// trackedVersion is what the pods' counts depend on besides the pods.
type trackedVersion struct {
	uid         types.UID
	generation  int64
	annotations string
	nsEpoch     uint64 // 0 unless the SidecarSet has a namespaceSelector
}

func newTracker() *tracker { return &tracker{sets: map[string]*tracked{}} }

func (t *tracker) versionOf(ss *v1beta1.SidecarSet) trackedVersion {
	v := trackedVersion{uid: ss.UID, generation: ss.Generation}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(ss.Annotations)) {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(ss.Annotations[k])
		b.WriteByte(0)
	}
	v.annotations = b.String()
	if ss.Spec.NamespaceSelector != nil {
		v.nsEpoch = t.nsEpoch
	}
	return v
}

// mark is what a dirty pod waits for before a round may clear it: the cache showing the version
// the pod informer's transform saw, which it sees before the cache stores it (or, with absent, the
// pod gone as well: a deletion the handlers report once the cache dropped the pod). A mark without a
// version is met by whatever the cache shows.
type mark struct {
	resourceVersion string
	absent          bool
}

// met reports whether the cache showing version ("" for no pod) meets m.
func (m mark) met(version string) bool {
	return m.resourceVersion == "" || version == m.resourceVersion || m.absent && version == ""
}

// replaces reports whether m takes the place of held, pod's mark already: a version the transform
// saw is the newest there is; an event handler's mark, which comes after the cache stored the
// version, only widens a mark of the same version, and must not clear what a later one asks for.
func (m mark) replaces(held mark) bool {
	return m.resourceVersion != "" && !m.absent || m.resourceVersion == held.resourceVersion
}

// touch marks pod dirty for every SidecarSet in names. A nil tracker (a Reconciler used without
// SetupWithManager) counts in full every round and needs no marks.
func (t *tracker) touch(pod types.NamespacedName, m mark, names []string) {
	if t == nil || len(names) == 0 { // most pods of a cluster: no lock taken for them
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range names {
		s := t.sets[name]
		if s == nil {
			continue // never counted: its first round counts every pod
		}
		s.mark(pod, m)
	}
}

// mark records m for pod unless a mark it must not replace is there.
func (s *tracked) mark(pod types.NamespacedName, m mark) {
	if s.dirty == nil {
		s.dirty = map[types.NamespacedName]mark{}
	}
	if held, ok := s.dirty[pod]; !ok || m.replaces(held) {
		s.dirty[pod] = m
	}
}

// namespacesChanged invalidates the counts of SidecarSets that select namespaces by label.
func (t *tracker) namespacesChanged() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nsEpoch++
}

func (t *tracker) forget(name string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sets, name)
}

// settle brings ss's counts up to date with its dirty pods, counting each with count (the version the
// cache shows, "" for none, and the pod's counts, nil for a pod that is gone or no longer managed),
// and from now on records pod events for ss even before it was ever counted. A pod whose mark the
// cache does not meet yet stays dirty: the cache is still behind the informer's transform. ok
// reports whether the counts are valid for ss as it is now; then c is them, with the
// revision decision recorded with them and when they were last counted over every pod.
func (t *tracker) settle(ss *v1beta1.SidecarSet, count func(types.NamespacedName) (string, *counted, error)) (c rollout.Counts, revision string, collisionCount int32, at time.Time, ok bool, err error) {
	t.mu.Lock()
	s := t.sets[ss.Name]
	if s == nil {
		t.sets[ss.Name] = &tracked{}
		t.mu.Unlock()
		return rollout.Counts{}, "", 0, time.Time{}, false, nil
	}
	if s.pods == nil || s.version != t.versionOf(ss) {
		t.mu.Unlock()
		return rollout.Counts{}, "", 0, time.Time{}, false, nil
	}
	dirty := s.dirty
	s.dirty = nil
	t.mu.Unlock()
	// Counted outside the lock: the pod event handler must not wait on a round. A pod that changes
	// meanwhile is marked dirty again, and counted again next round.
	fresh := make(map[types.NamespacedName]*counted, len(dirty))
	unmet := map[types.NamespacedName]mark{}
	for key, m := range dirty {
		var version string
		if version, fresh[key], err = count(key); err != nil {
			t.touchAll(ss.Name, dirty)
			return rollout.Counts{}, "", 0, time.Time{}, false, err
		}
		if !m.met(version) {
			unmet[key] = m
		}
	}
	t.touchAll(ss.Name, unmet)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sets[ss.Name] != s {
		return rollout.Counts{}, "", 0, time.Time{}, false, nil
	}
	for key, pc := range fresh {
		if old, had := s.pods[key]; had {
			s.counts = s.counts.Sub(old.counts)
			delete(s.pods, key)
			delete(s.notUpdated, key)
		}
		if pc != nil {
			s.add(key, *pc)
		}
	}
	return s.counts, s.revision, s.collisionCount, s.counted, true, nil
}

// add counts a pod that is not counted yet.
func (s *tracked) add(key types.NamespacedName, pc counted) {
	s.pods[key] = pc
	s.counts = s.counts.Add(pc.counts)
	if pc.counts.Updated == 0 {
		s.notUpdated[key] = struct{}{}
	}
}

// notUpdated lists the pods of name's counts not on its hash, as of its last settle (sorted, so
// that a round's ties are broken alike every time); ok is false when name has no valid counts.
func (t *tracker) notUpdated(ss *v1beta1.SidecarSet) (keys []types.NamespacedName, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sets[ss.Name]
	if s == nil || s.pods == nil || s.version != t.versionOf(ss) {
		return nil, false
	}
	keys = slices.SortedFunc(maps.Keys(s.notUpdated), func(a, b types.NamespacedName) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return keys, true
}

// touchAll marks keys dirty for name again (a round that could not count them, or whose cache did
// not show what they wait for), leaving a mark that came since in place.
func (t *tracker) touchAll(name string, keys map[types.NamespacedName]mark) {
	if len(keys) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.sets[name]; s != nil {
		for key, m := range keys {
			if _, ok := s.dirty[key]; !ok {
				s.mark(key, m)
			}
		}
	}
}

// reset records counts computed over pods, every managed pod of ss listed after settle, with the
// revision decision, and returns them with the number of pods the counts kept from events got
// wrong: the periodic recount's check. It is exact whatever events are on their way, because the
// pod informer's transform marks a pod dirty before the cache stores its new version (Pods): a pod
// listed at the resourceVersion it was counted at must count the same; one listed at another, or
// counted and no longer listed, or listed and never counted, must be marked dirty since settle.
// One deletion escapes it: a pod the informer finds gone only on relisting (a tombstone, which no
// transform sees) is marked by the Delete handler once the cache dropped it, and a recount that
// lists in between counts it as a difference.
func (t *tracker) reset(ss *v1beta1.SidecarSet, pods []*corev1.Pod, revision string, collisionCount int32, now time.Time) (c rollout.Counts, differences int) {
	s := &tracked{
		pods: make(map[types.NamespacedName]counted, len(pods)), notUpdated: map[types.NamespacedName]struct{}{},
		counted: now, revision: revision, collisionCount: collisionCount,
	}
	for _, p := range pods {
		s.add(types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, counted{p.ResourceVersion, rollout.PodCounts(p, ss)})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s.version = t.versionOf(ss)
	old := t.sets[ss.Name]
	if old == nil {
		t.sets[ss.Name] = s
		return s.counts, 0
	}
	s.dirty = old.dirty
	if old.pods != nil && old.version == s.version {
		for key, pc := range s.pods {
			kept, ok := old.pods[key]
			_, marked := old.dirty[key]
			switch {
			case ok && kept.resourceVersion == pc.resourceVersion:
				if kept.counts != pc.counts {
					differences++
				}
			case !marked && (ok || pc.counts != rollout.Counts{}):
				differences++ // another version, or a new managed pod, that no event marked
			}
		}
		for key := range old.pods {
			if _, listed := s.pods[key]; !listed {
				if _, marked := old.dirty[key]; !marked {
					differences++ // gone, or no longer managed, and no event marked it
				}
			}
		}
	}
	t.sets[ss.Name] = s
	return s.counts, differences
}

// namespaceEvents tells the tracker that Namespace labels changed: the counts of SidecarSets that
// select namespaces by label are then counted again. It enqueues nothing.
type namespaceEvents struct{ tr *tracker }

var _ handler.EventHandler = namespaceEvents{}

func (h namespaceEvents) Create(context.Context, event.CreateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.tr.namespacesChanged()
}

func (h namespaceEvents) Update(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if !apiequality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) {
		h.tr.namespacesChanged()
	}
}

func (h namespaceEvents) Delete(context.Context, event.DeleteEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.tr.namespacesChanged()
}

func (h namespaceEvents) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}
