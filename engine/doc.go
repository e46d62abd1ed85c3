// Package engine evaluates the policy decisions with embedded OPA.
//
// It loads the compiled bundle (package bundles) together with administrators' bundles, compiles
// them once, prepares every decision query once, and serves evaluations from an immutable Snapshot
// that is swapped atomically when bundles change. Nothing is parsed or compiled per request, and a
// Snapshot is safe for concurrent use.
//
// It owns the decision queries and the conversion of their results into Go values. It must not
// mutate pods (package mutation) nor build bundles (package bundles), and it never decides anything
// itself: every answer comes from the policies.
package engine
