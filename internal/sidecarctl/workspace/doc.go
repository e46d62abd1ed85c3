// Package workspace is what sidecarctl reads from its input, as a cluster would hold it: the
// documents of -f by kind (SidecarSets defaulted, hashed and admitted in input order as the
// validating webhook would admit them, Namespaces, ControllerRevisions, workloads, OpenKruise's
// whitelist ConfigMap), the policy snapshot over them and the administrators' bundles, each object's
// origin for errors (FILE:LINE: document N (Kind/Name): FIELD: reason, placed in helm's templates
// when standard input says where it came from), and every problem and warning found on the way.
//
// It decides nothing itself (internal/injector does, as for the webhooks) and judges nothing past
// admission: what check reports of the workloads is package check's. It must not know flags,
// output formats or exit codes.
package workspace
