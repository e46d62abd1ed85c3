// Package versions is the edge between the SidecarSet versions clients write — v1alpha1 and
// v1beta1 — and the one version everything else works on, v1beta1 (the hub): it turns what was
// written into the hub, turns the hub back into the version written (keeping what the client
// wrote where the two versions differ), and names validation errors by the fields written.
//
// It must not default, validate or decide; it only converts and renames.
package versions
