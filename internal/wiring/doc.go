// Package wiring assembles the sidecarops manager process on controller-runtime: the webhook
// server with its three admission handlers, the loader that keeps the policy snapshot current,
// certificates (self-managed with cert-controller, or provided), health and readiness, metrics and
// leader election. cmd/sidecarops-manager parses flags into Options; the e2e tests start the same
// assembly in-process against a real API server.
//
// It owns wiring and process concerns only. It must not decide (policies do), mutate (package
// mutation does) or load policy state itself (package loader does).
package wiring
