package injector

import (
	"context"

	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
)

// Policies is everything a snapshot is made from.
type Policies struct {
	// State holds the SidecarSets (defaulted and hashed), Namespaces and ControllerRevisions.
	State bundles.State
	// Admin are the administrators' verified bundles, in load order.
	Admin []*bundle.Bundle
	// Whitelist, when set, supplies the whitelist converted from OpenKruise's kruise-configuration
	// ConfigMap. It is called only when no bundle of Admin owns the whitelist root.
	Whitelist func() (*bundle.Bundle, error)
	// Reuse, when set, sees the compiled bundle before the engine prepares it and may answer a
	// snapshot instead (ok true; nil means "the snapshot in force already is this one"), which
	// skips the engine's compile, the expensive half.
	Reuse func(core *bundle.Bundle) (snap *engine.Snapshot, ok bool)
}

// NeedsWhitelist reports whether no bundle of admin owns the whitelist root, so that the whitelist
// converted from the kruise-configuration ConfigMap is the one the policies read.
func NeedsWhitelist(admin []*bundle.Bundle) bool {
	for _, b := range admin {
		if bundles.OwnsRoot(b, bundles.WhitelistRoot) {
			return false
		}
	}
	return true
}

// Snapshot compiles p.State and prepares it with the administrators' bundles, adding the
// ConfigMap's whitelist when none of them provides one. It returns the snapshot and the compiled
// bundle it was prepared from (sidecarctl compile writes it).
func Snapshot(ctx context.Context, p Policies) (*engine.Snapshot, *bundle.Bundle, error) {
	admin := p.Admin
	if p.Whitelist != nil && NeedsWhitelist(admin) {
		wl, err := p.Whitelist()
		if err != nil {
			return nil, nil, err
		}
		admin = append(admin[:len(admin):len(admin)], wl)
	}
	core, err := bundles.Compile(p.State)
	if err != nil {
		return nil, nil, err
	}
	if p.Reuse != nil {
		if snap, ok := p.Reuse(core); ok {
			return snap, core, nil
		}
	}
	snap, err := engine.Prepare(ctx, engine.Inputs{Core: core, SidecarSets: p.State.SidecarSets, ControllerRevisions: p.State.ControllerRevisions, Admin: admin})
	return snap, core, err
}
