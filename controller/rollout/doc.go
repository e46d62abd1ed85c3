// Package rollout is the pure core of the SidecarSet controller (compat §3): reading the rollout
// state a pod carries, a SidecarSet's status, which pods to upgrade in place now and why the others
// wait, the SidecarSetUpgradable condition, what an upgraded pod looks like, and how the
// ControllerRevisions change. It reproduces OpenKruise's arithmetic, so a cluster can move between
// the two controllers without a rollout changing course (deterministic tie-breaks aside:
// docs/operations.md).
//
// It must not talk to an API server, read a clock (callers pass "now") or mutate its inputs: it
// returns values and actions, which the controller applies and `sidecarctl rollout plan` prints.
package rollout
