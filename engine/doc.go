// Package engine evaluates the policy decisions with embedded OPA.
//
// It compiles the bundle of package bundles together with administrators' bundles once, prepares
// every decision query once, and serves evaluations from an immutable Snapshot that is swapped
// atomically when bundles change, so nothing is parsed or compiled per request and one request
// never sees two policy states.
//
// It owns the decision queries and the conversion of their results into Go values. It must not
// mutate pods (package mutation) nor build bundles (package bundles), and it never decides anything
// itself: every answer comes from the policies.
package engine
