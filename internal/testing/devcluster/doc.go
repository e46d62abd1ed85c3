// Package devcluster starts a local control plane — a real etcd and kube-apiserver through
// controller-runtime's envtest — with the sidecarops CRD and webhook configurations installed and
// the manager running in-process, serving the API server's admission calls over TLS. The e2e tests,
// test/rollout, test/kwok and `make demo` use it; the binaries come from `make envtest-bins` via
// KUBEBUILDER_ASSETS.
//
// It owns starting and stopping that environment. It must not contain behaviour under test: the
// manager it runs is package manager's, unchanged except for certificates and addresses.
package devcluster
