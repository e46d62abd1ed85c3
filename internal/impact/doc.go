// Package impact computes a SidecarSet's impact view, the facts the administrators' SidecarSet
// policies read beside the object itself (docs/governing.md): the namespaces its namespace scope
// selects, with their labels and Pod Security levels; how many existing pods its selector selects
// in each; and which checks of each namespace's enforced Pod Security level its sidecars fail,
// by k8s.io/pod-security-admission's own checks.
//
// It owns these facts and the pod Census the manager keeps them from (counters per namespace and
// label set, never a list of pods). It decides nothing: what a policy makes of the facts is the
// policies' (package engine evaluates them), and it neither reads a cluster nor writes anything.
package impact
