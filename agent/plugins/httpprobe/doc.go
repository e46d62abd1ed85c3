// Package httpprobe is the agent's http_probe plugin: after startDelaySeconds it probes each
// configured endpoint on its period and stores the outcome — Succeeded or Failed, or a state read
// from the JSON response (stateJSONPath) — through the endpoint's storageConfig, whose
// markerPolicies turn states such as idle/allocated into pod labels and annotations.
//
// A timeout, a refused connection or an unexpected status is a result (state Failed), never a
// plugin failure; a failed store is reported in the plugin's status and retried on the next probe.
//
// It owns probing and the mapping of a response to a state. It must not write to Kubernetes
// itself: results leave through the agent Host (package storage).
package httpprobe
