// Package storage is where the sidecar agent's results leave the pod: every write the agent makes to
// the Kubernetes API server goes through it. It owns the storageConfig of docs/agent.md (InKube: the
// pod's annotations, labels and conditions, or a field of any object named by target + jsonPath,
// with ${SELF:POD_NAME}/${SELF:POD_NAMESPACE} substitution), the markerPolicies that turn a state
// into pod labels and annotations, and the key/value ConfigMap that keeps a value per workload.
//
// Writes are merge patches carrying the resourceVersion they were computed from, so a concurrent
// writer makes the API server answer Conflict and the write is recomputed (retry.RetryOnConflict);
// a write that would change nothing is skipped, so a probe repeating the same state costs a GET.
//
// It must not decide what to store: probing, downloading and signalling are the plugins'; the
// plugin lifecycle is package agent's.
package storage
