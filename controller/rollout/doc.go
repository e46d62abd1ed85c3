// Package rollout is the pure core of the SidecarSet controller (compat §3): it reads the rollout state
// a pod carries, computes a SidecarSet's status, chooses which pods to upgrade in place now (and
// why the others wait), builds the SidecarSetUpgradable pod condition and decides how the
// SidecarSet's ControllerRevisions must change. Everything reproduces OpenKruise's arithmetic so
// that a cluster can move between the two controllers without a rollout changing course.
//
// It owns the arithmetic of those decisions and the reading of pod state (hash annotations,
// in-place-update state, hot-upgrade twins, readiness). It must not talk to an API server, read a
// clock (the caller passes "now" where a timestamp is written) or mutate its inputs: it returns
// values and actions, and the controller applies them with patches built by package mutation or
// its own.
//
// Deliberate differences from OpenKruise, all in the name of determinism:
//   - ties in the active-pods order and in priorityStrategy keep the caller's pod order (OpenKruise
//     uses unstable sorts, and its priority sorter breaks ties by the index of the pod in the list it
//     was handed, which comes from an informer cache in no particular order);
//   - status is a pure function of the pods passed in, so the controller can (and should, unlike
//     OpenKruise, ref quirk Q16) recompute it on pod deletion.
package rollout
