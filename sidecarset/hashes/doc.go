// Package hashes computes the two SidecarSet hash annotations, kruise.io/sidecarset-hash and
// kruise.io/sidecarset-hash-without-image (compat §1.9), byte for byte as OpenKruise does, so that
// pods injected by OpenKruise and by sidecarops carry interchangeable hashes.
//
// It owns the encoding (Go encoding/json of the containers, plus all initContainers when a native
// sidecar exists, quirk Q1) and the digest. It does not default: callers hash the defaulted object
// (sidecarset/defaults.SidecarSetAndHash), because container defaults are part of the
// encoded bytes. It never modifies its input.
package hashes
