package mutation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// PatchPodMetadata applies one SidecarSet's spec.patchPodMetadata to the pod annotations, entries in
// list order (compat §1.18, S14–S17). Injection and the controller's in-place upgrade (compat §3.6 step 5)
// both apply it. Policies it does not know are ignored, as OpenKruise ignores
// them: validation owns rejecting them, and injection must not fail on a value it was never asked to
// judge.
func PatchPodMetadata(ann map[string]string, ss *v1beta1.SidecarSet) error {
	for i, p := range ss.Spec.PatchPodMetadata {
		switch p.PatchPolicy {
		case v1beta1.SidecarSetRetainPatchPolicy, "":
			for k, v := range p.Annotations {
				if _, ok := ann[k]; !ok {
					ann[k] = v
				}
			}
		case v1beta1.SidecarSetOverwritePatchPolicy:
			for k, v := range p.Annotations {
				ann[k] = v
			}
		case v1beta1.SidecarSetMergePatchJsonPatchPolicy:
			// Sorted so that, of several bad keys, the same one is reported every time.
			for _, k := range slices.Sorted(maps.Keys(p.Annotations)) {
				v := p.Annotations[k]
				old, ok := ann[k]
				if !ok || old == "" {
					ann[k] = v
					continue
				}
				merged, err := mergePatchJSON(old, v)
				if err != nil {
					return fieldErr(ss.Name, fmt.Sprintf("spec.patchPodMetadata[%d].annotations[%s]", i, k), err)
				}
				ann[k] = merged
			}
		}
	}
	return nil
}

var errMergePatchNotDocument = errors.New("merge patch must be a JSON object or array")

// mergePatchJSON merges patch into the pod's existing value with RFC 7386.
//
// OpenKruise calls the pre-module evanphx/json-patch, whose documents are Go maps: its output has
// sorted keys, and a patch that is a bare scalar or null is an error there. json-patch/v5 instead
// keeps the document's key order and appends new keys in map-iteration order (so its bytes are not
// even deterministic), and returns scalar patches as the result. The pre-check and the
// re-encoding below give back OpenKruise's behaviour and a stable value, which both byte
// compatibility and idempotent injection need. (Re-encoding also sorts nested objects the merge did
// not touch, which the old library would have left in their original order.)
func mergePatchJSON(doc, patch string) (string, error) {
	p := bytes.TrimSpace([]byte(patch))
	if json.Valid(p) && p[0] != '{' && p[0] != '[' {
		return "", errMergePatchNotDocument
	}
	merged, err := jsonpatch.MergePatch([]byte(doc), []byte(patch))
	if err != nil {
		return "", err
	}
	return canonicalJSON(merged)
}

// canonicalJSON re-encodes a JSON value with encoding/json: sorted keys, compact, numbers kept
// verbatim.
func canonicalJSON(b []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(out), nil
}
