// Command demo is `make demo`: a local control plane (real etcd and kube-apiserver,
// internal/testing/devcluster), the sidecarops manager serving its webhooks, kwok as the kubelet of a
// fake node, the examples applied, pods created and shown injected, and a sidecar upgraded in place.
// It stays up until Ctrl-C so kubectl can explore it; --once runs through and exits. It is a
// demonstration, not a product binary.
package main
