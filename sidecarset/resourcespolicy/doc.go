// Package resourcespolicy implements a SidecarSet container's resourcesPolicy (compat §1.19): the
// small expression language over `cpu` / `memory` (parse, validate, evaluate) and the aggregation of
// the pod's target containers that feeds it.
//
// It owns the arithmetic only. It must not decide which SidecarSets match a pod or which container
// names belong to sidecars (callers pass those names in), and it must not mutate the pod: Compute
// returns the resources that replace the sidecar's, and package mutation writes them.
package resourcespolicy
