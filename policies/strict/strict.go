// Package strict ships the strict SidecarSet policy, package sidecarsets.strict in a bundle of root
// sidecarsets/strict (this directory): what OpenKruise admits but almost certainly is a mistake.
// sidecarctl check evaluates it, embedded, unless an administrators' bundle provides that root; the
// manager loads it only as any administrators' bundle.
//
// The Rego decides; this package only carries it. Administrators copy the directory to tune it:
// data.json holds each rule's action and the rules' parameters.
package strict

import (
	"embed"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/open-policy-agent/opa/v1/bundle"
)

// The tests stay out, as bundles.Read leaves them out of an administrators' bundle.
//
//go:embed .manifest strict.rego sidecarsets/strict/data.json
var files embed.FS

// Root is the bundle's root, and the path of its data.
const Root = "sidecarsets/strict"

// Bundle is the shipped bundle, read once; callers must not modify it.
var Bundle = sync.OnceValues(func() (*bundle.Bundle, error) {
	b, err := bundle.NewCustomReader(bundle.NewFSLoaderWithRoot(files, ".")).
		WithBundleName("sidecarctl:" + Root).WithSkipBundleVerification(true).Read()
	if err != nil {
		return nil, fmt.Errorf("the shipped strict policy bundle: %w", err)
	}
	return &b, nil
})

// Rules names, sorted, the rules b's strict policy may report: those data.json gives an action,
// which a rule needs to report anything. None when b holds no such data.
func Rules(b *bundle.Bundle) []string {
	var node any = b.Data
	for _, key := range []string{"sidecarsets", "strict", "actions"} {
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[key]
	}
	actions, _ := node.(map[string]any)
	return slices.Sorted(maps.Keys(actions))
}
