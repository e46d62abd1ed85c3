// Package render renders the installation manifests the way an administrator does before applying
// them: `kubectl kustomize` of a config/ directory and `helm template` of charts/sidecarops, with the
// Helm that `make tools` builds (SIDECAROPS_HELM). It is for tests: it reads and runs, it applies
// nothing.
package render
