// Package explain is `sidecarctl explain`'s work over a workspace: for each workload's pod and
// each SidecarSet, "matches" or the match policy's own reasons it does not, whether the installed
// pod webhook sees the pod at all, and the Pod Security warning the injection would draw.
//
// The reasons are the policies' (engine.Snapshot.Explain); it must not word a reason of its own
// nor read files or flags.
package explain
