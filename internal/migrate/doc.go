// Package migrate is the preflight of taking a cluster over from a running OpenKruise: it reads
// what OpenKruise left (the SidecarSet CRD and its conversion, OpenKruise's webhook registrations
// and controller, SidecarSets, their ControllerRevisions, injected pods) and says what blocks a
// safe switch, each blocker with the command that clears it.
//
// It only reads. It must not write to the cluster, decide injection, or re-derive validation: a
// SidecarSet's verdict is internal/injector's.
package migrate
