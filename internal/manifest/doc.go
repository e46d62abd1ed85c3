// Package manifest reads and writes the Kubernetes manifests of the sidecarctl CLI.
//
// It owns the form of manifests: finding them (-f with a file, a directory walked recursively, or
// stdin), splitting files into YAML or JSON documents, expanding v1/List, decoding every document
// strictly into its typed object, and reporting each problem as one line that names the file, the
// document, the object, the field and the reason. It also owns the pod template of each workload
// kind (a pod view for injection and the write-back of the injected pod), the encoding of workloads
// back to YAML or JSON, and the conversion of OpenKruise's kruise-configuration whitelist into the
// data.whitelist document the policies read.
//
// It must not default, validate or decide. Objects come out exactly as written: strictness here is
// only about form (unknown or duplicate fields, wrong types, unknown kinds), never about meaning
// (a container without an image, an invalid selector operator, a whitelist regex that does not
// compile). Those belong to packages defaults and validation and to the policies.
package manifest
