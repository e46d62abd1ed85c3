// Package prefilter keeps the API server from calling the pod webhook for pods no SidecarSet can
// inject into.
//
// It owns two things: compiling the SidecarSets' pod selectors and namespace scopes into one CEL
// match condition (Condition), and keeping that condition on the pod webhook's registration
// (Reconciler, server-side apply of that one matchCondition, so the manifests' owner, the
// certificate rotator and the administrators' own conditions keep theirs). A pod the condition
// rejects costs the API server a CEL evaluation instead of an HTTPS call.
//
// The condition is a necessary condition, never the decision: it only ever widens what the
// policies (package policies through engine) match — empty selectors, unknown namespace labels and
// anything it cannot express count as "may match" — and the webhook still decides every pod it
// is sent. It must not decide injection, mutate pods, or touch the bundles.
package prefilter
