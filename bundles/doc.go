// Package bundles compiles SidecarSets, Namespaces and ControllerRevisions into an OPA bundle that
// stock `opa` can read, signs bundles, and reads administrators' bundles with signature verification.
//
// The compiled bundle (root "sidecarops") holds the normalised state as data, the static policies of
// package policies, and a generated module whose rules let OPA's rule index find candidate
// SidecarSets for a pod without scanning all of them.
//
// It owns the shape of the data the policies read (docs/design.md, "Bundle contract"). It must not
// evaluate policies (package engine does) nor default or hash SidecarSets (they arrive defaulted).
package bundles
