package rollout

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// View is what a round knows of a SidecarSet's managed pods. It has two forms: EveryPod, after a
// count of every managed pod, and KeptCounts, the counts kept from pod events with the pods not on
// the SidecarSet's hash. Both decide the same round (TestViewsDecideAlike).
type View interface {
	// counts are the status counts over every managed pod.
	counts(ss *v1beta1.SidecarSet) Counts
	// round plans the round over the view's pods.
	round(ss *v1beta1.SidecarSet, c Counts) Round
}

// EveryPod is a view of every pod the SidecarSet manages.
type EveryPod []*corev1.Pod

func (v EveryPod) counts(ss *v1beta1.SidecarSet) Counts { return CountPods(ss, v) }

func (v EveryPod) round(ss *v1beta1.SidecarSet, _ Counts) Round { return NextRound(ss, v) }

// KeptCounts is a view of the counts over every managed pod and the managed pods not on the
// SidecarSet's hash (NextUpgradeOf). The SidecarSet must pass PlansFromCounts, or have every pod
// updated and no hot upgrade (then there is nothing to plan).
type KeptCounts struct {
	Counts     Counts
	NotUpdated []*corev1.Pod
}

func (v KeptCounts) counts(*v1beta1.SidecarSet) Counts { return v.Counts }

func (v KeptCounts) round(ss *v1beta1.SidecarSet, c Counts) Round {
	return NextRoundOf(ss, v.NotUpdated, c)
}

// History is the revision decision a round's status carries (the latest ControllerRevision and
// the collision count) and where the SidecarSet's ControllerRevisions come from, which name the
// fields a pod that cannot be upgraded in place changed. Revisions is called only when a round has
// such a pod to explain, which few rounds have (nil, or nil returned: the reasons name hashes).
type History struct {
	Latest         string
	CollisionCount int32
	Revisions      func() []*appsv1.ControllerRevision
}

// revisions are h.Revisions' answer, or none.
func (h History) revisions() []*appsv1.ControllerRevision {
	if h.Revisions == nil {
		return nil
	}
	return h.Revisions()
}

// Event is an Event a round records on its SidecarSet.
type Event struct {
	Type, Reason, Action, Message string
}

// The reasons of the Events a rollout round records on its SidecarSet: why it waits, and the pods
// it skips (compat §3.6).
const (
	ReasonRolloutWaiting    = "RolloutWaiting"
	ReasonNotUpgradablePods = "NotUpgradablePods"
)

// Actions is everything one round of a SidecarSet's controller does (compat §3.2 steps 5–10), as a
// value: the controller carries it out, and `sidecarctl rollout plan` prints it.
type Actions struct {
	// Counts and Status are the status before the round's writes (its conditions are the caller's).
	Counts Counts
	Status v1beta1.SidecarSetStatus
	// Plan is where every pod of the view stands.
	Plan Plan
	// Reset are the hot-upgraded pods whose old twin goes back to the empty image, each written
	// only while ReadyToReset holds for a fresh copy; a round that resets does nothing else.
	Reset []*corev1.Pod
	// Rolling reports a round of the rollout: not stopped, nothing to reset, pods left to update.
	// Only then are Upgrade, NotUpgradable and Events carried out.
	Rolling bool
	// Upgrade are the pods upgraded in place, in order, each written only while StillUpgradable
	// holds for a fresh copy; each then gets its SidecarSetUpgradable entry set to true.
	Upgrade []*corev1.Pod
	// NotUpgradable get their SidecarSetUpgradable entry set to false.
	NotUpgradable []NotUpgradable
	// Events are recorded on the SidecarSet.
	Events []Event

	history History
}

// StatusAfter is the status once the pods of upgraded (as planned → as written) are written.
func (a Actions) StatusAfter(ss *v1beta1.SidecarSet, upgraded map[*corev1.Pod]*corev1.Pod) v1beta1.SidecarSetStatus {
	c := a.Counts
	for before, after := range upgraded {
		c = c.Sub(PodCounts(before, ss)).Add(PodCounts(after, ss))
	}
	return c.Status(ss, a.history.Latest, a.history.CollisionCount)
}

// Decide is one round of ss's controller over view v, whose status carries h's revision decision.
func Decide(ss *v1beta1.SidecarSet, v View, h History) Actions {
	c := v.counts(ss)
	a := Actions{Counts: c, Status: c.Status(ss, h.Latest, h.CollisionCount), history: h}
	round := v.round(ss, c)
	a.Plan, a.Reset = round.Plan, round.Reset
	switch {
	case round.Plan.Stopped == StoppedNotUpdate || round.Plan.Stopped == StoppedPaused:
		return a
	case len(round.Reset) > 0:
		return a
	case c.Updated >= c.Matched:
		return a
	}
	a.Rolling = true
	a.Upgrade, a.NotUpgradable = round.Plan.Upgrade, round.Plan.NotUpgradable
	if n := len(a.NotUpgradable); n > 0 {
		first := a.NotUpgradable[0].Pod
		a.Events = append(a.Events, Event{corev1.EventTypeNormal, ReasonNotUpgradablePods, "Upgrade", fmt.Sprintf(
			"SidecarSet in-place update detected %d not upgradable pod(s) in this round, will skip them. First: %s/%s: %s",
			n, first.Namespace, first.Name, ExplainNotUpgradable(first, ss, h.revisions()))})
	}
	if len(a.Upgrade) == 0 {
		if why := Waiting(round.Plan); why != "" {
			a.Events = append(a.Events, Event{corev1.EventTypeNormal, ReasonRolloutWaiting, "Upgrade", why})
		}
	}
	return a
}

// Waiting says why p's candidates wait ("" when nothing does): the answer to "the upgrade doesn't
// happen and I can't see why".
func Waiting(p Plan) string {
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
	return strings.Join(why, "; ")
}

// StillUpgradable is an upgrade's precondition, checked on a fresh copy of the pod when its write
// is retried: managed, not on the hash yet, and a candidate (upgradable in place and consistent).
func StillUpgradable(pod *corev1.Pod, ss *v1beta1.SidecarSet) bool {
	canUpgrade, consistent := Upgradability(pod, ss)
	return IsManaged(pod, ss) && !IsUpdated(pod, ss) && canUpgrade && consistent
}
