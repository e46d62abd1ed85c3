// Package manifest reads and writes the Kubernetes manifests of the sidecarctl CLI: finding them (a
// file, a directory, stdin), splitting documents, decoding each strictly into its typed object with
// one error line naming file, document, object, field and reason, the pod template of each workload
// kind and its write-back, encoding to YAML or JSON, and the conversion of OpenKruise's
// kruise-configuration whitelist into the data.whitelist document the policies read.
//
// It must not default, validate or decide: strictness here is about form (unknown fields, wrong
// types, unknown kinds), never meaning, which belongs to internal/sidecarset/defaults and
// validation and to the policies. Objects come out exactly as written.
package manifest
