package controller

import (
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// ConflictFinder names the other SidecarSets ss collides with, as the conflict policy says
// (decision D7). current is false while the policy state does not hold ss as it is yet.
type ConflictFinder interface {
	Conflicts(ctx context.Context, ss *v1beta1.SidecarSet) (others []string, current bool, err error)
}

// Reasons of the Conflict condition and of its Events.
const (
	ReasonCollides   = "CollidesWithSidecarSets"
	ReasonNoConflict = "NoCollision"
)

// conflicts is what the controller knows of collisions: the partners of each SidecarSet, so that
// both sides are reconciled when either changes or goes.
type conflicts struct {
	mu       sync.Mutex
	partners map[string][]string
	// enqueue sends a SidecarSet to the work queue (a channel source).
	enqueue chan event.TypedGenericEvent[*v1beta1.SidecarSet]
	metrics *Metrics
}

func newConflicts(m *Metrics) *conflicts {
	return &conflicts{partners: map[string][]string{}, enqueue: make(chan event.TypedGenericEvent[*v1beta1.SidecarSet], 64), metrics: m}
}

// record keeps others as name's partners and returns every SidecarSet whose condition may now be
// stale: the partners before and after.
func (c *conflicts) record(name string, others []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.partners[name]
	if len(others) == 0 {
		delete(c.partners, name)
	} else {
		c.partners[name] = others
	}
	c.metrics.setInConflict(len(c.partners))
	if slices.Equal(before, others) {
		return nil
	}
	touched := append(slices.Clone(before), others...)
	slices.Sort(touched)
	return slices.Compact(touched)
}

// reconcileLater sends names to the work queue without blocking the reconcile that found them.
func (c *conflicts) reconcileLater(ctx context.Context, names []string) {
	for _, name := range names {
		ev := event.TypedGenericEvent[*v1beta1.SidecarSet]{Object: &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}}}
		go func() {
			select {
			case c.enqueue <- ev:
			case <-ctx.Done():
			}
		}()
	}
}

// conflictCondition evaluates ss's collisions and returns its conditions as they must now be
// (ss's own left untouched); pending is true when the policy state does not hold ss yet, and the
// SidecarSet must be looked at again shortly. It records an Event and the metrics on a change.
func (r *Reconciler) conflictCondition(ctx context.Context, ss *v1beta1.SidecarSet) (conds []metav1.Condition, pending bool, err error) {
	conds = ss.Status.Conditions
	if r.Conflicts == nil || r.conflicts == nil {
		return conds, false, nil
	}
	others, current, err := r.Conflicts.Conflicts(ctx, ss)
	if err != nil || !current {
		return conds, !current, err
	}
	r.conflicts.reconcileLater(ctx, r.conflicts.record(ss.Name, others))
	prev := meta.FindStatusCondition(conds, v1beta1.ConditionConflict)
	next := metav1.Condition{Type: v1beta1.ConditionConflict, Status: metav1.ConditionFalse, Reason: ReasonNoConflict, ObservedGeneration: ss.Generation}
	if len(others) > 0 {
		next.Status, next.Reason = metav1.ConditionTrue, ReasonCollides
		next.Message = "collides with SidecarSet " + strings.Join(others, ", ") +
			": the validating webhook refuses this, but they were admitted at the same moment; on a pod both select only the older is injected, the newer is withheld with a warning. Change either to resolve it"
	} else if prev == nil {
		return conds, false, nil // never in conflict: no condition at all, as OpenKruise shows
	}
	if prev != nil && prev.Status == next.Status && prev.Message == next.Message && prev.ObservedGeneration == next.ObservedGeneration {
		return conds, false, nil
	}
	conds = slices.Clone(conds)
	meta.SetStatusCondition(&conds, next)
	switch {
	case next.Status == metav1.ConditionTrue && (prev == nil || prev.Message != next.Message):
		r.Metrics.conflictDetected()
		ctrllog.FromContext(ctx).Info("SidecarSet collides with others admitted at the same moment", "others", others)
		r.event(ss, corev1.EventTypeWarning, ReasonCollides, "%s", next.Message)
	case next.Status == metav1.ConditionFalse && prev != nil && prev.Status == metav1.ConditionTrue:
		r.event(ss, corev1.EventTypeNormal, ReasonNoConflict, "%s", "no longer collides with another SidecarSet")
	}
	return conds, false, nil
}

// forget drops a deleted SidecarSet and reconciles its former partners, whose conditions named it.
func (r *Reconciler) forgetConflicts(ctx context.Context, name string) {
	if r.conflicts != nil {
		r.conflicts.reconcileLater(ctx, r.conflicts.record(name, nil))
	}
}

func (r *Reconciler) event(ss *v1beta1.SidecarSet, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(ss, nil, kind, reason, "Inject", format, args...)
	}
}
