package injector

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/mutation"
)

// Outcome says what happened to a pod.
type Outcome string

const (
	// Injected means SidecarSets matched and were applied.
	Injected Outcome = "injected"
	// NotMatched means no SidecarSet matched the pod.
	NotMatched Outcome = "not-matched"
	// Gated means an administrator's gate vetoed injection; the pod stays as it is.
	Gated Outcome = "gated"
	// Inactive means the pod has finished or is being deleted: it will never run a sidecar.
	Inactive Outcome = "inactive"
)

// PodRequest is one pod to inject.
type PodRequest struct {
	// Pod is the decoded pod. Its namespace is defaulted in place; it is otherwise left alone.
	Pod *corev1.Pod
	// Raw is the pod's JSON as received, which the decision reads; nil marshals Pod. Passing what
	// arrived saves a marshal as costly as the decision and cannot lose a field a policy reads.
	Raw []byte
	// Decoded says Pod was decoded from Raw without error, by a decoder that refuses duplicate names
	// and tells names apart by case (the webhook's): Raw is then known to be valid JSON, which spares
	// the decision checking it, and to say what Pod says, which lets the decision read Pod's fields
	// (engine.Snapshot.DecideDecoded) and a Cache answer it.
	Decoded bool
	// Namespace is the namespace the pod is created in (the admission request's), used when the
	// pod names none.
	Namespace string
	// PatchOnly says the caller needs the patch alone (the webhook): PodResult.Pod is then nil for
	// an injected pod, and the injected pod's lists are not built (mutation.Input.PatchOnly).
	PatchOnly bool
}

// PodResult is what the one injection path did with a pod.
type PodResult struct {
	Outcome   Outcome
	Namespace string   // the pod's namespace after defaulting
	Matched   []string // SidecarSets the policies matched, in injection order
	Denied    []string // the gates' reasons (Outcome Gated)
	Injected  []string // SidecarSets that injected something (Outcome Injected)
	// Withheld are matched SidecarSets left out because they collide with an older one (decision D7).
	Withheld []engine.Withheld
	// Pod is the injected pod (Outcome Injected; nil when the request was PatchOnly), else the
	// request's pod. Patch turns the request's
	// pod into it (empty unless Injected). Both share memory, with the request's pod, the snapshot's
	// SidecarSets and, through a Cache, other results: treat them as read-only.
	Pod   *corev1.Pod
	Patch []jsonpatch.JsonPatchOperation
}

// InjectionError is a pod the matched SidecarSets cannot be injected into (an invalid
// MergePatchJson, a missing revision, a resourcesPolicy that selects nothing). It is a property of
// the pod and the SidecarSets, not a fault of the server: admission denies such a pod.
type InjectionError struct{ Err error }

func (e *InjectionError) Error() string { return "sidecar injection failed: " + e.Err.Error() }
func (e *InjectionError) Unwrap() error { return e.Err }

// Pod decides which SidecarSets of snap apply to req.Pod and injects them with m, as the pod
// webhook does on creation (docs/openkruise-compat.md compat §1.12). An error is either an
// *InjectionError or a failure to evaluate the policies.
func Pod(ctx context.Context, snap *engine.Snapshot, m *mutation.Injector, req PodRequest) (PodResult, error) {
	return (*Cache)(nil).Pod(ctx, snap, m, req)
}

// podNamespace is the namespace a pod's SidecarSets are looked up in: its own, else the request's,
// else "default", where OpenKruise looks a namespace-less pod's SidecarSets up (compat §1.12 step 2).
func podNamespace(own, requested string) string {
	switch {
	case own != "":
		return own
	case requested != "":
		return requested
	}
	return metav1.NamespaceDefault
}

// Pod is the package's Pod, answering from c what it can. Only a request whose Raw is known to
// say what Pod says (Decoded, or no Raw at all) is answered from the cache or kept in it.
func (c *Cache) Pod(ctx context.Context, snap *engine.Snapshot, m *mutation.Injector, req PodRequest) (PodResult, error) {
	pod := req.Pod
	pod.Namespace = podNamespace(pod.Namespace, req.Namespace)
	res := &PodResult{Namespace: pod.Namespace, Pod: pod, Patch: []jsonpatch.JsonPatchOperation{}}
	// A pod that will never run its containers gains nothing from sidecars (compat §1.12 step 1);
	// deciding for it would only cost an evaluation.
	if !mutation.IsActive(pod) {
		res.Outcome = Inactive
		return *res, nil
	}
	raw, decoded := req.Raw, req.Decoded
	if raw == nil {
		var err error
		if raw, err = json.Marshal(pod); err != nil {
			return *res, fmt.Errorf("encoding the pod: %w", err)
		}
		decoded = true
	}
	if !decoded {
		c = nil
	}
	key, e, cached := c.lookup(snap, pod.Namespace, raw)
	var dec engine.Decision
	if e != nil {
		dec = e.dec
	} else {
		var err error
		if decoded {
			dec, err = snap.DecideDecoded(ctx, pod.Namespace, pod, raw)
		} else {
			dec, err = snap.Decide(ctx, pod.Namespace, raw)
		}
		if err != nil {
			return *res, err
		}
		if cached {
			e = c.store(snap, key, dec)
		}
	}
	if decided(res, dec) {
		return *res, nil
	}
	in := mutation.Input{Pod: pod, SidecarSets: dec.Matched, History: snap.History(), PatchOnly: req.PatchOnly}
	out, err := c.inject(snap, m, in, raw, e)
	if err != nil {
		return *res, &InjectionError{Err: err}
	}
	res.Outcome, res.Injected, res.Pod, res.Patch = Injected, out.Injected, out.Pod, out.Patch
	return *res, nil
}

// decided fills in res what dec says, and reports whether that is the whole answer: the gates
// vetoed the pod, or nothing matched it.
func decided(res *PodResult, dec engine.Decision) bool {
	res.Matched, res.Denied, res.Withheld = dec.MatchedNames(), dec.Denied, dec.Withheld
	switch {
	case len(dec.Denied) > 0:
		res.Outcome = Gated
	case len(dec.Matched) == 0:
		res.Outcome = NotMatched
	default:
		return false
	}
	return true
}

// withParents makes patch apply to the pod's own JSON when it has no spec or no metadata object
// (absent, or null): the decoded pod cannot tell those from an empty one, and the patch's paths
// below /spec or /metadata need the object, so an "add" of an empty one goes first (replacing a
// null). The API server
// always sends both; anyone else may not, and must not be answered a patch that does not apply.
func withParents(pod *corev1.Pod, raw []byte, patch []jsonpatch.JsonPatchOperation) []jsonpatch.JsonPatchOperation {
	var parents []jsonpatch.JsonPatchOperation
	// Only a pod without a name or without containers can lack the object, so a real pod costs
	// nothing more than these two tests.
	for _, parent := range []struct {
		key    string
		absent bool
	}{{"metadata", pod.Name == "" && pod.GenerateName == ""}, {"spec", len(pod.Spec.Containers) == 0}} {
		if parent.absent && touches(patch, "/"+parent.key+"/") && !gjson.GetBytes(raw, parent.key).IsObject() {
			parents = append(parents, jsonpatch.JsonPatchOperation{Operation: "add", Path: "/" + parent.key, Value: map[string]any{}})
		}
	}
	if parents == nil {
		return patch
	}
	return append(parents, patch...)
}

func touches(patch []jsonpatch.JsonPatchOperation, prefix string) bool {
	for _, op := range patch {
		if strings.HasPrefix(op.Path, prefix) {
			return true
		}
	}
	return false
}
