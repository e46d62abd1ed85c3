// Package kwok runs the kwok controller (built by hack/kwok-bin.sh) against a local control plane, so
// Pods bound to a fake Node behave as if a kubelet ran them: envtest has no kubelet, and the in-place
// sidecar upgrade must be proven against a status that follows the spec the way a kubelet's does.
//
// It owns the Stages kwok runs (embedded from stages/, nothing read from ~/.kwok) and the fake
// imageID (ImageID); what each stage does and what is not simulated is in docs/design.md, "Test
// harness". It must not contain behaviour under test, nor anything a real kubelet would not report.
package kwok
