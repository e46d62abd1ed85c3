// Package check is what `sidecarctl check` finds in a workspace: the SidecarSets refused (the
// rejected documents validated for what is left of them), the workloads whose pods the injection
// fails or the API server refuses, the workloads and SidecarSets the installed pod webhook never
// sees, and what the SidecarSet policies say of every SidecarSet as admission would ask them (who
// asks, the impact over the input's and the cluster's Namespaces and pods, CREATE or UPDATE); each
// a finding of its rule, with the severity --strict gives advice, silenced as the rules say, in
// input order.
//
// Decisions are internal/injector's; printing is findings'. It must not read files or flags, and
// reads a cluster only through ReadCluster, read-only.
package check
