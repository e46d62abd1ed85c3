// Package inject is `sidecarctl inject`'s work over a workspace: every workload's pods injected
// through internal/injector as the pod webhook would inject them (or left as written where the
// installed webhook never sees them), validated as the API server would, and the result as the
// workloads to print or as the RFC 6902 patch per workload (`--patch`), its paths leading into the
// workload's pod template.
//
// Decisions are internal/injector's; what cannot be printed is a problem of the workspace. It must
// not read files or flags, nor print the workloads (manifest.Encode does).
package inject
