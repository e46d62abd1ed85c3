// Package validation checks one SidecarSet on its own, as OpenKruise's validating webhook does before
// it looks at other SidecarSets (compat §2 steps 1–5 and the syntax of step 12): metadata, canary
// annotations, selectors, strategies, containers and volumes (a subset of Kubernetes' pod
// validation), resourcesPolicy, patchPodMetadata syntax and the UPDATE-only rules. The rules, their
// order, field paths and differences from OpenKruise are in docs/validation.md.
//
// Callers validate the defaulted object (decision D5); field paths are real Kubernetes paths
// (decision D4). It must not decide anything involving other SidecarSets beyond reading the canary
// base: conflicts and the whitelist are policies (package policies). It never panics and never
// modifies its arguments.
package validation
