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
	// Compiler, when set, prepares the snapshot from what it compiled for earlier calls, so that a
	// change costs what it touches (the policy loader keeps one). It answers the snapshot it
	// answered last when nothing changed.
	Compiler *engine.Compiler
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
// ConfigMap's whitelist when none of them provides one, through p.Compiler (a new one when unset;
// its Bundle is the compiled bundle, which sidecarctl compile writes).
func Snapshot(ctx context.Context, p Policies) (*engine.Snapshot, error) {
	admin := p.Admin
	if p.Whitelist != nil && NeedsWhitelist(admin) {
		wl, err := p.Whitelist()
		if err != nil {
			return nil, err
		}
		admin = append(admin[:len(admin):len(admin)], wl)
	}
	c := p.Compiler
	if c == nil {
		c = new(engine.Compiler)
	}
	return c.Snapshot(ctx, p.State, admin)
}
