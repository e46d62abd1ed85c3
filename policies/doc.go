// Package policies holds the Rego policies that make every sidecarops decision, embedded so that
// the binaries and the bundles they compile carry the policies they were built and tested with
// (docs/design.md, "Decisions"):
//
//	sidecarops.selector   LabelSelector matching and overlap (a library)
//	sidecarops.labels     the pod's and its namespace's labels, as selector tests read them
//	sidecarops.match      data.sidecarops.match.decision: which SidecarSets inject into a pod
//	sidecarops.explain    data.sidecarops.explain.reasons: why each SidecarSet does or does not
//	sidecarops.conflict   data.sidecarops.conflict.violations: collisions with other SidecarSets
//	sidecarops.whitelist  data.sidecarops.whitelist.violations: patchPodMetadata keys refused
//	sidecarops.governance data.sidecarops.governance.findings: the SidecarSet policies' findings
//
// Administrators read and test the same files with `opa test policies --ignore strict`; `go test
// ./policies` runs those tests too and enforces their coverage. policies/strict is a bundle of its
// own (sidecarctl's strict findings, a SidecarSet policy), tested from its directory: `opa test
// policies/strict`, which places its data.json. Go code must not re-implement these decisions.
package policies
