// Package prefilter keeps the API server from calling the pod webhook for pods no SidecarSet can
// inject into: it compiles the SidecarSets' pod selectors and namespace scopes into a Filter — an
// object selector where one says it all, else a CEL match condition (Condition), with the object
// selector every SidecarSet requires beside it — and keeps it on the pod webhook's registration
// (Reconciler and Widener, server-side apply of that condition and selector only, so the other
// owners of the configuration keep theirs).
//
// The filter is a necessary condition, never the decision: it only ever widens what the policies
// match — anything it cannot express counts as "may match" — and the webhook still decides every
// pod it is sent. It must not decide injection, mutate pods, or touch the bundles.
package prefilter
