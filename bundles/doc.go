// Package bundles compiles SidecarSets and Namespaces into an OPA bundle that
// stock `opa` can read, signs bundles, and reads administrators' bundles with signature verification.
//
// A Builder compiles successive States, converting each object once (the policy engine recompiles
// only what a change touches); a Build becomes a bundle for stock opa with Bundle.
//
// The compiled bundle (root "sidecarops") holds the normalised state as data, the policies of
// package policies, and a generated module that lets OPA's rule index find a pod's candidate
// SidecarSets without scanning them all. Administrators own the roots "whitelist" (WhitelistRoot)
// and "gates"; OwnsRoot tells whose a bundle is.
//
// It owns the shape of the data the policies read (docs/design.md, "Bundle contract"). It must not
// evaluate policies (package engine does) nor default or hash SidecarSets (they arrive defaulted).
package bundles
