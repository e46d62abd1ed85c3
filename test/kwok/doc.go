// Package kwok proves, on a real kube-apiserver and etcd (internal/testing/devcluster), that the kwok
// controller with internal/testing/kwok's stages behaves as the kubelet the in-place sidecar upgrade
// needs: Pods bound to the fake Node become Running and Ready with imageIDs, and an in-place change
// of a container's image is reported back in status with a new imageID while the Pod stays Ready.
//
// It needs KUBEBUILDER_ASSETS (`make envtest-bins`) and the kwok binary (`make kwok-bin`, or
// KWOK_BIN); a missing kwok binary fails the test rather than skipping it, so a green run always
// means the kubelet behaviour was exercised.
package kwok
