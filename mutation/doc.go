// Package mutation turns a pod and the SidecarSets already matched to it into the injected pod and
// the RFC 6902 JSON patch that produces it (compat §1.11–compat §1.20), byte-compatible with what OpenKruise's
// pod webhook writes, so that pods injected by either are indistinguishable to the controller.
//
// It owns the mechanics of injection: patchPodMetadata, placing containers and init containers,
// volume/device sharing, transferEnv, hot-upgrade twins, volumes, imagePullSecrets, the
// kruise.io/sidecarset-* annotations, and a patch built from that plan (never from a diff of two
// documents).
//
// It must not decide anything the policies own: which SidecarSets match the pod, whether the pod
// may be injected at all, conflicts, and the annotation whitelist are settled before Inject is
// called, and Inject applies exactly the SidecarSets it is given, in the order given. It makes no
// API calls and reads no clock or random source except those injected through Injector, so that
// the webhook, the controller and the CLI all render the same pod from the same inputs.
//
// Two decisions are delegated to sibling packages rather than re-implemented here: the injection
// revision (package revisions, compat §1.5) and resourcesPolicy arithmetic (package resources, ref
// compat §1.19).
package mutation
