// Package agent tests the sidecar agent (package agent, cmd/sidecar-agent) against a real
// kube-apiserver and etcd (controller-runtime envtest; `make envtest-bins` builds them and `make
// test` sets KUBEBUILDER_ASSETS), the agent authenticated as the ServiceAccount of config/agent
// with exactly that RBAC, probing local HTTP servers and signalling a real child process; and it
// checks that `sidecarctl inject` puts the agent of examples/sidecar-agent into the pod.
//
// It owns those tests only; it must not contain agent behaviour.
package agent
