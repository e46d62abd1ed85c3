// Package governance runs the SidecarSet policies against a real kube-apiserver and etcd
// (controller-runtime envtest) with the manager in process and examples/policies loaded as an
// administrators' bundle: requests made as impersonated tenants, refusals and warnings as the API
// server returns them, and Pod Security admission refusing the pods injection would make fail.
package governance
