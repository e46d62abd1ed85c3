// Package e2e runs sidecarops against a real kube-apiserver and etcd (controller-runtime envtest,
// binaries built by `make envtest-bins`): the API server calls the manager's webhooks over TLS, and
// the tests check what the API server stores.
package e2e
