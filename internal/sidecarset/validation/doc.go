// Package validation checks one SidecarSet on its own, as OpenKruise's validating webhook does
// before it looks at other SidecarSets (compat §2 steps 1–5, and the syntactic part of step 12):
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
//	func SidecarSet(ss, old *v1alpha1.SidecarSet, revs history.Source, others Lookup) field.ErrorList
//
// old is nil on CREATE. revs resolves injectionStrategy.revision (nil means "no revisions").
// others finds the canary base by name (nil means "no other SidecarSets", so a canary is then
// rejected because its base cannot be found).
//
// Conventions:
//   - Callers validate the defaulted object (decision D5): run defaults.SidecarSet
//     first. Validation does not default by itself: what is validated must be exactly what is
//     stored and hashed. A value the defaulting always fills (podInjectPolicy, shareVolumePolicy,
//     imagePullPolicy, a volume's source, …) is therefore reported when missing, as OpenKruise
//     does on raw input.
//   - Field paths are real Kubernetes paths (decision D4): spec.containers[0].podInjectPolicy,
//     spec.updateStrategy.partition, metadata.annotations[apps.kruise.io/sidecarset-base], … where
//     OpenKruise prints spec.container.…, spec[0].… or an unprefixed updateStrategy.
//   - Messages are OpenKruise's where it has one (compat §2); error types are OpenKruise's, except where
//     it had no error for a rule sidecarops adds (listed below).
//
// Where sidecarops differs from OpenKruise's webhook, and why:
//   - resourcesPolicy.targetContainersMode must be sum or max: a CRD enum in OpenKruise, and offline
//     there is no API server to enforce the schema.
//   - Canary errors point at metadata.annotations[apps.kruise.io/sidecarset-base] (base rules) or
//     spec.updateStrategy.type (RollingUpdate), where OpenKruise reports "metadata" for all.
//     The base is immutable once set; making an existing SidecarSet a canary is allowed.
//   - A selector that does not convert is reported at the selector with the conversion error
//     (OpenKruise: an empty message at <selector>.selector); "no containers" is reported at
//     spec.containers (OpenKruise: spec).
//   - Types OpenKruise leaves unstated or gets wrong for the rule: resourcesPolicy together with
//     resources, and resourcesPolicy on a plain initContainer, are Forbidden; a key repeated across
//     patchPodMetadata entries is Invalid at spec.patchPodMetadata[i].annotations[key].
//   - v1alpha1 spec.namespace is checked as the label value OpenKruise's conversion turns it into,
//     and then spec.namespaceSelector is ignored, as the conversion drops it.
//
// The pod-level subset (pod.go) covers: container names (required, DNS-1123 label, unique across
// initContainers and containers), image, imagePullPolicy, terminationMessagePolicy, restartPolicy,
// ports, env (strict names, valueFrom), volumeMounts and volumeDevices against spec.volumes
// (including the mountPath/devicePath conflict), resources (names, non-negative, requests within
// limits, extended resources), probes and lifecycle handlers, probes/lifecycle forbidden on plain
// initContainers; volumes (name, exactly one source, and the common sources: hostPath, emptyDir,
// secret, configMap, persistentVolumeClaim, downwardAPI, projected). Not covered: securityContext,
// envFrom, resizePolicy, the other volume sources' own fields, and pod-wide rules that do not
// apply to a set of sidecars (hostPort clashes with the app, pod-level resources).
//
// The function never panics and never modifies its arguments.
package validation
