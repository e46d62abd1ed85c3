// Package controller is the SidecarSet controller (compat §3): it reconciles each SidecarSet against
// the pods it injected — ControllerRevisions, status, in-place sidecar upgrades (cold and hot) as the
// update strategy allows — and says with Events why pods wait.
//
// It owns how pods are cached (Pods.NewInformer: client-go's shared informer, whose transform stores each
// pod as a compact record of what the controller reads, and which gives readers pods again), the
// status counts kept from pod events (tracker) and the side effects: reading the informer caches,
// writing pods, pod conditions, ControllerRevisions, SidecarSet status and Events, and the
// expectations that keep a stale cache from upgrading a pod twice. Every decision is
// controller/rollout's, so that `sidecarctl rollout plan` shows exactly what the controller will do;
// this package must not re-derive any of it, inject (the webhook does) or touch the policy bundles.
// Its deviations in timing from OpenKruise's controller are in docs/operations.md.
package controller
