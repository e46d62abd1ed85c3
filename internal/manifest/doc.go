// Package manifest reads and writes the Kubernetes manifests of the sidecarctl CLI: finding them (a
// file, a directory, stdin; kustomize's configuration files are skipped), splitting documents,
// decoding each strictly into its typed object with one error line naming file, document, object,
// field and reason, the pod template of each workload kind (OpenKruise's CloneSet, Advanced
// StatefulSet, Advanced DaemonSet and BroadcastJob included) and its write-back, encoding to YAML
// or JSON, and the conversion of OpenKruise's kruise-configuration whitelist into the
// data.whitelist document the policies read.
//
// It reads what kubectl would send: a key written twice is a warning and its last value is kept,
// and a document of a kind it does not read is kept as written (passed through), not refused.
// Each document is bounded, and so is the whole input (Reader): a document larger as written, or as
// the JSON it converts to (its YAML aliases expanded, its escapes as JSON writes them), is an error
// of its own, and the one that takes the input over its bound ends the reading; both are found
// before anything is expanded.
//
// It must not default, validate or decide: strictness here is about form (unknown fields, wrong
// types, a kind it reads in a version it does not), never meaning, which belongs to
// sidecarset/defaults and validation and to the policies. Objects come out exactly as
// written, less the empty structs that marshalling typed objects adds.
package manifest
