// Package storage is where the sidecar agent's results leave the pod: every write the agent makes to
// the Kubernetes API server goes through it. It owns storageConfig (docs/agent.md §5: pod
// annotations, labels and conditions, or a field of any object by target + jsonPath), the
// markerPolicies that turn a state into pod labels and annotations, and the per-workload ConfigMap.
//
// Writes are merge patches carrying the resourceVersion they were computed from, so a concurrent
// writer makes the write retry instead of being overwritten; a write that changes nothing is
// skipped, so a steady probe costs a GET.
//
// It must not decide what to store: that is the plugins'; the plugin lifecycle is package agent's.
package storage
