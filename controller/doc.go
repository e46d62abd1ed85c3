// Package controller is the SidecarSet controller (compat §3): it reconciles each SidecarSet against
// the pods it injected — ControllerRevisions, status, in-place sidecar upgrades (cold and hot) as the
// update strategy allows — and says with Events why pods wait.
//
// It owns how pods are cached (NewInformerFunc's pod informer lists and watches pods itself, on
// HTTP/1.1 connections of its own that read a trickle of events in batches, decodes their protobuf
// straight into compact records of what the controller reads, calls the event handlers on the
// watch's own goroutine, and gives readers pods again) and the side effects: reading the informer caches, writing pods, pod
// conditions,
// ControllerRevisions, SidecarSet status and Events, and the expectations that keep a stale cache
// from upgrading a pod twice. Every decision is controller/rollout's, so that `sidecarctl rollout
// plan` shows exactly what the controller will do; this package must not re-derive any of it, inject
// (the webhook does) or touch the policy bundles. Its deviations in timing from OpenKruise's
// controller are in docs/operations.md.
package controller
