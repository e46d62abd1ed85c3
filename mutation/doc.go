// Package mutation turns a pod and the SidecarSets already matched to it into the injected pod and
// the RFC 6902 JSON patch that produces it (compat §1.11–compat §1.20), byte-compatible with what
// OpenKruise's pod webhook writes, so that pods injected by either are indistinguishable. IsActive is
// the one active-pod predicate, shared with controller/rollout.
//
// It owns the mechanics of injection and a patch built from that plan (never from a diff), which is
// the same whether or not the injected pod is built (Input.PatchOnly, the webhook's case). It must
// not decide what the policies own (matching, gates, conflicts, the whitelist): Inject applies
// exactly the SidecarSets it is given, in that order. It makes no API calls and reads no clock or
// random source but the Injector's, so every face renders the same pod from the same inputs. The
// injection revision is sidecarset/history's, resourcesPolicy arithmetic resourcespolicy's.
package mutation
