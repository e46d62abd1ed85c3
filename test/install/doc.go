// Package install installs sidecarops the way an administrator does, with the commands of docs/install.md, on
// a real kube-apiserver and etcd: `helm install` of charts/sidecarops (applied server-side), the
// manager started as a process with exactly the arguments, environment and files its rendered
// Deployment gives its container (pod.go plays the kubelet), a pod injected through the Service's
// endpoint; then `helm upgrade` from an earlier chart version and `helm uninstall`.
package install
