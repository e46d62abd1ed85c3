// Package validation checks one SidecarSet on its own, as OpenKruise's validating webhook does
// before it looks at other SidecarSets (ref §2 steps 1–5, and the syntactic part of step 12):
// metadata, canary annotations, selectors, injection and update strategies, the containers and
// volumes (a subset of Kubernetes' pod validation, since k8s.io/kubernetes is not a dependency),
// resourcesPolicy, patchPodMetadata syntax, and the UPDATE-only rules.
//
// It must not decide anything that involves other SidecarSets beyond reading the canary base:
// container/volume/annotation conflicts and the patchPodMetadata whitelist are Rego policies
// (package policies). A canary and its base never conflict with each other (sidecarops decision
// 3); that exemption lives with the conflict policy, this package only checks the canary's own
// annotations.
//
// API, extending design.md's `SidecarSet(ss, old, revs)` with the one piece of outside state the
// canary rules need:
//
//	func SidecarSet(ss, old *v1alpha1.SidecarSet, revs revisions.Source, others Lookup) field.ErrorList
//
// old is nil on CREATE. revs resolves injectionStrategy.revision (nil means "no revisions").
// others finds the canary base by name (nil means "no other SidecarSets", so a canary is then
// rejected because its base cannot be found).
//
// Conventions:
//   - Callers validate the defaulted object (sidecarops decision 5): run defaults.SidecarSet
//     first. Validation never defaults by itself, so that the checks stay visible in tests; a
//     value the defaulting webhook always fills (podInjectPolicy, shareVolumePolicy, imagePullPolicy,
//     a volume's source, …) is reported when it is missing, as OpenKruise does on raw input.
//   - Field paths are real Kubernetes paths (sidecarops decision 4): spec.containers[0].podInjectPolicy,
//     spec.updateStrategy.partition, metadata.annotations[apps.kruise.io/sidecarset-base], … where
//     OpenKruise prints spec.container.…, spec[0].… or an unprefixed updateStrategy.
//   - Messages are OpenKruise's where it has one (ref §2); error types are OpenKruise's, except where
//     it had no error for a rule sidecarops adds (listed below).
//
// Additions to OpenKruise's webhook, each because sidecarops runs without the API server that
// enforces them in a cluster:
//   - resourcesPolicy.targetContainersMode must be sum or max (a CRD enum in OpenKruise).
//
// The function never panics and never modifies its arguments.
package validation
