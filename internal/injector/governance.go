package injector

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sidecarops/sidecarops/engine"
)

// Governance is what admitting one SidecarSet says beside OpenKruise's rules: the administrators'
// SidecarSet policies' findings by action, and the Pod Security levels its sidecars fail.
type Governance struct {
	Deny, Warn, DryRun []engine.Finding
	// PodSecurity names each selected namespace whose enforced Pod Security level the sidecars fail,
	// with the checks (docs/governing.md, "Pod Security"), sorted by namespace.
	PodSecurity []string
}

// Warnings are the admission warnings: the warn findings, then the Pod Security ones.
func (g Governance) Warnings() []string {
	out := make([]string, 0, len(g.Warn)+len(g.PodSecurity))
	for _, f := range g.Warn {
		out = append(out, "sidecarops policy "+f.String())
	}
	return append(out, g.PodSecurity...)
}

// Refusal is the message of a denial: every deny finding, or "" when there is none.
func (g Governance) Refusal() string {
	if len(g.Deny) == 0 {
		return ""
	}
	msgs := make([]string, len(g.Deny))
	for i, f := range g.Deny {
		msgs[i] = f.String()
	}
	return "denied by the SidecarSet policies: " + strings.Join(msgs, "; ")
}

// GovernSidecarSet evaluates snap's SidecarSet policies on r. The webhook and sidecarctl check both
// ask it, so an offline verdict is the admission's for the same review.
func GovernSidecarSet(ctx context.Context, snap *engine.Snapshot, r engine.Review) (Governance, error) {
	fs, err := snap.Govern(ctx, r)
	if err != nil {
		return Governance{}, err
	}
	var g Governance
	for _, f := range fs {
		switch f.Action {
		case engine.ActionDeny:
			g.Deny = append(g.Deny, f)
		case engine.ActionWarn:
			g.Warn = append(g.Warn, f)
		default:
			g.DryRun = append(g.DryRun, f)
		}
	}
	if r.Impact != nil {
		names := make([]string, 0, len(r.Impact.Namespaces))
		for name, ns := range r.Impact.Namespaces {
			if len(ns.PodSecurity.Violations) > 0 {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			ps := r.Impact.Namespaces[name].PodSecurity
			checks := make([]string, len(ps.Violations))
			for i, v := range ps.Violations {
				checks[i] = v.String()
			}
			g.PodSecurity = append(g.PodSecurity, fmt.Sprintf(
				"sidecarops: SidecarSet %s: its sidecars violate PodSecurity %q of namespace %s, which refuses the pods it injects into there: %s",
				r.SidecarSet.Name, ps.Enforce+":"+ps.EnforceVersion, name, strings.Join(checks, ", ")))
		}
	}
	return g, nil
}
