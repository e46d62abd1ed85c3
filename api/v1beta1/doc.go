// Package v1beta1 holds the SidecarSet API of group apps.kruise.io, version v1beta1: OpenKruise's
// storage version and the conversion hub, wire-compatible with OpenKruise. v1alpha1 differs only in
// two SidecarSetSpec fields and shares every other type with it.
//
// It owns the Go types, their JSON names and field order (the SidecarSet hash is computed over
// encoding/json output, so field order is part of the contract) and the scheme registration. It
// must not hold behaviour: defaulting and hashing live in internal/sidecarset/defaults and hashes,
// validation in internal/sidecarset/validation, decisions in the Rego policies.
//
// The CRD does not serve this version yet (make generate builds it from api/v1alpha1 alone):
// storing v1beta1 needs the conversion webhook, without which the API server would prune a
// v1alpha1 spec.namespace (issue #12).
//
// +kubebuilder:object:generate=true
// +groupName=apps.kruise.io
package v1beta1
