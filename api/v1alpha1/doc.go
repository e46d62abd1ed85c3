// Package v1alpha1 holds the SidecarSet API of group apps.kruise.io, version v1alpha1,
// wire-compatible with OpenKruise.
//
// It owns the Go types, their JSON names and field order (the SidecarSet hash is computed over
// encoding/json output, so field order is part of the contract), the well-known annotation and
// label names, and the scheme registration. It must not hold behaviour: defaulting and hashing live
// in sidecarset/defaults and hashes, validation in sidecarset/validation,
// decisions in the Rego policies.
//
// +kubebuilder:object:generate=true
// +groupName=apps.kruise.io
package v1alpha1
