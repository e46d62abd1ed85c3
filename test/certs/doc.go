// Package certs tests the manager's self-managed certificates (cert-controller) on a real API
// server: the Secret, the files the webhook server loads, and the caBundle injected into the webhook
// configurations. It has its own control plane (internal/testing/devcluster) because the rotator
// rewrites the caBundle of the webhook configurations, which would break a cluster whose webhooks
// envtest wired up.
package certs
