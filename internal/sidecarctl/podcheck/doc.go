// Package podcheck judges the pods a workload of the input creates, once injected, as the cluster
// would: what the API server's validation refuses (named at the field of the workload as written,
// or at the sidecar or volume and the SidecarSet that brought it), the Pod Security level the
// sidecars make them fail (the pod webhook's own warning), and the workload volumes that shadow a
// sidecar's (a strict finding).
//
// It injects nothing (its callers do, through internal/injector) and must not decide severities or
// whether a finding is reported: that is check's and findings'.
package podcheck
