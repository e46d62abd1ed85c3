// Package loader keeps the engine's policy snapshot current inside the manager: it is the in-cluster
// twin of sidecarctl's workspace, and builds every snapshot through internal/injector.Snapshot.
//
// It owns the inputs of a snapshot and their life cycle: SidecarSets, Namespaces and
// ControllerRevisions from the manager's informer cache, administrators' bundles from files, OPA
// bundle services and the kruise-configuration ConfigMap, the debounced recompile and atomic swap,
// last-known-good on failure, readiness, and the metrics, logs and Events that say which bundles
// serve (docs/operations.md).
//
// It must not decide (the policies do), mutate pods, build bundles itself, or write to the API
// server beyond Events: it reads the cache only, so every replica can run it without leadership.
package loader
