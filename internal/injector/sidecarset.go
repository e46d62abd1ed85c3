package injector

import (
	"context"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/sidecarset/validation"
)

// ValidateSidecarSet answers what the validating webhook answers for ss (old on UPDATE, else nil):
// it defaults ss in place (decision D5: in a cluster the defaulting webhook has run, and defaulting
// twice changes nothing), applies the single-object rules and, only when those pass, the policy
// checks against snap's other SidecarSets and the whitelist, as OpenKruise does. old is validated
// as stored: defaulting it could make an upgradeType that was never set look immutable. The error
// is a failure to evaluate the policies; a refusal is the ErrorList.
func ValidateSidecarSet(ctx context.Context, snap *engine.Snapshot, ss, old *v1beta1.SidecarSet) (field.ErrorList, error) {
	defaults.SidecarSet(ss)
	if errs := validation.SidecarSet(ss, old, snap.History(), snap); len(errs) > 0 {
		return errs, nil
	}
	var before *v1beta1.SidecarSet
	if old != nil {
		before = old.DeepCopy()
		defaults.SidecarSet(before)
	}
	return snap.PolicyErrors(ctx, ss, before)
}

// ConflictFinder answers which other SidecarSets one collides with from the snapshot in force
// (the controller's ConflictFinder). The controller asks on every reconcile, which pod events
// trigger, while the answer changes only with the snapshot: it is evaluated once per SidecarSet
// and snapshot.
type ConflictFinder struct {
	Snapshots interface{ Current() *engine.Snapshot }

	mu    sync.Mutex
	snap  *engine.Snapshot
	known map[string][]string
}

// Conflicts names the other SidecarSets that ss collides with (decision D7), sorted. current is
// false, and nothing is evaluated, while the snapshot does not hold ss at its generation: the
// answer would be about another version. The snapshot's own (defaulted) copy is evaluated.
func (f *ConflictFinder) Conflicts(ctx context.Context, ss *v1beta1.SidecarSet) (others []string, current bool, err error) {
	snap := f.Snapshots.Current()
	if snap == nil {
		return nil, false, nil
	}
	held, ok := snap.SidecarSet(ss.Name)
	if !ok || held.UID != ss.UID || held.Generation < ss.Generation {
		return nil, false, nil
	}
	f.mu.Lock()
	if f.snap != snap {
		f.snap, f.known = snap, map[string][]string{}
	}
	others, ok = f.known[ss.Name]
	f.mu.Unlock()
	if ok {
		return slices.Clone(others), true, nil
	}
	vs, err := snap.Conflicts(ctx, held)
	if err != nil {
		return nil, true, err
	}
	for _, v := range vs {
		others = append(others, v.Other)
	}
	slices.Sort(others)
	others = slices.Compact(others)
	f.mu.Lock()
	if f.snap == snap {
		f.known[ss.Name] = others
	}
	f.mu.Unlock()
	return slices.Clone(others), true, nil
}
