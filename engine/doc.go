// Package engine evaluates the policy decisions with embedded OPA.
//
// Its Compiler compiles what package bundles builds together with administrators' bundles,
// recompiling after a change only what the change touches (docs/design.md, "Incremental
// compiles"), prepares every decision query, and serves evaluations from an immutable Snapshot that
// is swapped atomically, so nothing is parsed or compiled per request and one request never sees
// two policy states. The per-pod queries (match, explain, delta) are compiled once by the
// snapshot's query compiler and evaluated through OPA's topdown API, without the evaluation context
// and result set rego's prepared query made per evaluation; TestTermQueryAnswersAsRego holds them
// to what rego answers.
//
// It owns the decision queries and the conversion of their results into Go values. It must not
// mutate pods (package mutation) nor build bundles (package bundles), and it never decides anything
// itself: every answer comes from the policies.
package engine
