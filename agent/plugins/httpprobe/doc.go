// Package httpprobe is the agent's http_probe plugin (docs/agent.md §6): after startDelaySeconds it
// probes each configured endpoint on its period and stores the outcome — Succeeded, Failed, or a
// state read from the JSON response — through the endpoint's storageConfig.
//
// A timeout, a refused connection or an unexpected status is a result (state Failed), never a
// plugin failure: the probe reports what it sees, and the pod's markers follow it.
//
// It owns probing and the mapping of a response to a state. It must not write to Kubernetes itself:
// results leave through the agent Host (agent/storage).
package httpprobe
