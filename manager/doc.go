// Package manager assembles the sidecarops manager process on controller-runtime: the webhook server
// with its three admission handlers (package webhook), internal/loader keeping the policy snapshot
// current, the SidecarSet controller (package controller, elected replica only), the pod webhook's
// prefilter (webhook/prefilter), certificates (self-managed or provided), health, readiness, metrics
// and leader election. cmd/sidecarops-manager parses flags into Options; internal/testing/devcluster
// starts the same assembly in-process.
//
// It owns wiring and process concerns only. It must not decide (the policies do), mutate (package
// mutation does) or hold policy state (internal/loader does).
package manager
