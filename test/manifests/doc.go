// Package manifests tests the installation manifests under config/: they must render with
// `kubectl kustomize` and say what the manager and its webhooks expect.
package manifests
