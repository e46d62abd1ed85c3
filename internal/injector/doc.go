// Package injector is the one path from an object to what sidecarops does with it. Every face goes
// through it — the webhooks, sidecarctl, the loader, the benchmarks and the load generator — so the
// CLI cannot disagree with a cluster by construction:
//
//   - Pod: namespace default, the inactive-pod skip, the policy decision (gates included) and the
//     injection with the snapshot's ControllerRevisions, answered as a PodResult or *InjectionError.
//   - ValidateSidecarSet: defaults, the single-object rules, then the policy checks.
//   - Snapshot: the whitelist fallback, the compile of the SidecarSets and the engine's prepare.
//
// It composes bundles, engine, mutation and sidecarset; it must not decide (the policies
// do), render pods (package mutation does), or know about HTTP, files, metrics or logs (the faces do).
package injector
