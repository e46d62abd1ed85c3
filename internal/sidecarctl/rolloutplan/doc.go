// Package rolloutplan is `sidecarctl rollout plan`'s work: the SidecarSet's next round as the
// controller decides it (rollout.Decide over every pod it manages, found by rollout.Scope.Manages
// from files or by controller/managed from a cluster), the forecast of the rounds after, why a pod
// cannot be upgraded in place (from its ControllerRevision, else from the pod itself), and the
// report in text or JSON.
//
// Every decision is controller/rollout's: it must not plan, order or count pods itself, write to
// a cluster, or read files or flags (the workspace and the client come from package main).
package rolloutplan
