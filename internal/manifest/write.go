package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Format is an output format of Encode.
type Format string

const (
	// YAML writes one document per object, separated by "---" lines.
	YAML Format = "yaml"
	// JSON writes the object itself when there is exactly one, else a v1/List of them (an empty
	// one for none), indented like kubectl.
	JSON Format = "json"
)

// Encode writes objs to w in the given format and order. Keys are sorted, as kubectl prints them.
// A status that holds no information is left out (see generic).
func Encode(w io.Writer, format Format, objs ...runtime.Object) error {
	docs := make([]any, len(objs))
	for i, obj := range objs {
		doc, err := generic(obj)
		if err != nil {
			return err
		}
		docs[i] = doc
	}
	switch format {
	case YAML:
		var out bytes.Buffer
		for i, doc := range docs {
			if i > 0 {
				out.WriteString("---\n")
			}
			b, err := yaml.Marshal(doc)
			if err != nil {
				return err
			}
			out.Write(b)
		}
		_, err := w.Write(out.Bytes())
		return err
	case JSON:
		var v any = map[string]any{"apiVersion": "v1", "kind": "List", "items": docs}
		if len(docs) == 1 {
			v = docs[0]
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "    ")
		enc.SetEscapeHTML(false) // annotations often hold JSON or shell; keep them readable
		return enc.Encode(v)
	}
	return fmt.Errorf("manifest: unknown output format %q (want %q or %q)", format, YAML, JSON)
}

// generic is obj as the JSON document it marshals to, minus the noise of marshalling a typed
// object: a status struct is always emitted because omitempty does not apply to structs, as
// "status: {}" or, for StatefulSet, DaemonSet and ReplicaSet, with their non-omitempty zero
// counters ("replicas: 0"); StatefulSet volumeClaimTemplates, being whole PVCs, carry one each.
// Such a status decodes back to the same zero value, so leaving it out loses nothing. Pruning the
// generic document is simpler than per-kind copies with status cleared, and covers every kind.
//
// "metadata.creationTimestamp: null", the other classic noise, needs no pruning: since
// k8s.io/apimachinery v0.34 ObjectMeta tags it omitzero (TestEncodeHasNoNoise guards this).
func generic(obj runtime.Object) (map[string]any, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("manifest: encoding %T: %w", obj, err)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // float64 would round int64 fields above 2^53
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return nil, fmt.Errorf("manifest: %T does not encode as a JSON object", obj)
	}
	pruneZeroStatus(doc)
	// Objects built in code may lack TypeMeta; output must still say what they are.
	if doc["apiVersion"] == nil || doc["kind"] == nil {
		gvk, ok := gvkOf(obj)
		if !ok {
			return nil, fmt.Errorf("manifest: %T has no apiVersion/kind and is not a supported kind", obj)
		}
		doc["apiVersion"], doc["kind"] = gvk.GroupVersion().String(), gvk.Kind
	}
	return doc, nil
}

// pruneZeroStatus removes zero statuses of the object v and of the objects embedded in it (those
// with metadata). Every status in the Kubernetes types is a struct, never a pointer, so absent and
// zero decode alike.
func pruneZeroStatus(v any) {
	switch v := v.(type) {
	case map[string]any:
		if _, isObject := v["metadata"]; isObject {
			if status, ok := v["status"]; ok && isZeroJSON(status) {
				delete(v, "status")
			}
		}
		for _, x := range v {
			pruneZeroStatus(x)
		}
	case []any:
		for _, x := range v {
			pruneZeroStatus(x)
		}
	}
}

// isZeroJSON reports whether v decodes to a zero value: null, false, 0, "", an empty array, or an
// object of only such values.
func isZeroJSON(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == ""
	case json.Number:
		f, err := v.Float64()
		return err == nil && f == 0
	case map[string]any:
		for _, x := range v {
			if !isZeroJSON(x) {
				return false
			}
		}
		return true
	case []any:
		return len(v) == 0
	}
	return false
}
