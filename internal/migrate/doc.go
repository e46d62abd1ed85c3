// Package migrate is the preflight of taking a cluster over from a running OpenKruise: it reads
// what OpenKruise left (the SidecarSet CRD and its conversion, OpenKruise's webhook registrations
// and controller, its other kinds in use, SidecarSets, their ControllerRevisions, its
// patchPodMetadata whitelist, the pods it injected or serves with its pod webhook) and what of
// sidecarops is installed (its manager's flags, its pod webhook's selectors), and says which path of
// docs/migration.md the cluster takes, what OpenKruise's pod webhook keeps doing or stops doing, and
// what blocks a safe switch, each blocker with the command that clears it.
//
// It only reads, pods a page at a time. It must not write to the cluster, decide injection, or
// re-derive validation: a SidecarSet's verdict is internal/injector's, and which pods sidecarops'
// pod webhook sees is internal/podwebhook's.
package migrate
