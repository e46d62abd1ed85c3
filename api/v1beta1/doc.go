// Package v1beta1 holds the SidecarSet API of group apps.kruise.io, version v1beta1: OpenKruise's
// storage version and the conversion hub, wire-compatible with OpenKruise. v1alpha1 differs only in
// two SidecarSetSpec fields and shares every other type with it.
//
// It owns the Go types, their JSON names and field order (the SidecarSet hash is computed over
// encoding/json output, so field order is part of the contract) and the scheme registration. It
// must not hold behaviour: defaulting and hashing live in sidecarset/defaults and hashes,
// validation in sidecarset/validation, decisions in the Rego policies.
//
// Everything in sidecarops but the edges that decode what clients write (package
// sidecarset/versions) works on this version.
//
// +kubebuilder:object:generate=true
// +groupName=apps.kruise.io
package v1beta1
