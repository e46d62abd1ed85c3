// Package rollout proves the SidecarSet controller on a real kube-apiserver and etcd
// (internal/testing/devcluster) with kwok as the kubelet (internal/testing/kwok): pods are created
// through the API and injected by the manager's webhook, and after an in-place image change report
// the new image only after a delay, as a restarting container would. The tests watch the pods while
// the manager rolls sidecars out and check the strategy's bounds at every observed moment.
//
// It needs KUBEBUILDER_ASSETS (`make envtest-bins`) and the kwok binary (`make kwok-bin`, or
// KWOK_BIN); either missing fails the run rather than skipping it.
package rollout
