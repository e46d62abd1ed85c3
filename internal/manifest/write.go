package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

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
// Empty structs that marshalling adds are left out (see document); documents (OpenKruise's
// workloads, kinds passed through) are written as they were read.
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

// generic is obj as the JSON document Encode writes: document, and the apiVersion and kind from
// the table for objects built in code without TypeMeta.
//
// "metadata.creationTimestamp: null", the other classic noise of typed objects, needs no pruning:
// since k8s.io/apimachinery v0.34 ObjectMeta tags it omitzero (TestEncodeHasNoNoise guards this).
func generic(obj runtime.Object) (map[string]any, error) {
	v, err := document(obj)
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("manifest: %T does not encode as a JSON object", obj)
	}
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

// document is v as the JSON it marshals to, minus what marshalling a typed value adds that the
// manifest did not say (omitZeroStructs).
func document(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("manifest: encoding %T: %w", v, err)
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // float64 would round int64 fields above 2^53
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("manifest: encoding %T: %w", v, err)
	}
	omitZeroStructs(reflect.ValueOf(v), doc)
	return doc, nil
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

// omitZeroStructs removes from doc, the JSON of v, each struct field tagged omitempty whose value is
// zero. encoding/json writes them anyway, because omitempty does not apply to structs: "status:
// {}", a Deployment's "strategy: {}", a StatefulSet's "updateStrategy: {}", a container's
// "resources: {}", none of them in the manifest. An absent field decodes to the same zero value, so
// nothing is lost; a pointer to an empty struct (emptyDir: {}) is not zero and stays.
func omitZeroStructs(v reflect.Value, doc any) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Type().Implements(jsonMarshaler) || reflect.PointerTo(v.Type()).Implements(jsonMarshaler) {
		return // it writes itself, not field by field (an Unstructured document: as it was read)
	}
	switch v.Kind() {
	case reflect.Struct:
		m, ok := doc.(map[string]any)
		if !ok {
			return
		}
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-":
				continue
			case f.Anonymous && name == "" && deref(f.Type).Kind() == reflect.Struct:
				omitZeroStructs(v.Field(i), m) // inline: its fields are the object's
				continue
			case !f.IsExported():
				continue
			case name == "":
				name = f.Name
			}
			fv := v.Field(i)
			if fv.Kind() == reflect.Struct && fv.IsZero() && slices.Contains(strings.Split(opts, ","), "omitempty") {
				delete(m, name)
				continue
			}
			omitZeroStructs(fv, m[name])
		}
	case reflect.Slice, reflect.Array:
		items, ok := doc.([]any)
		if !ok {
			return
		}
		for i := range min(v.Len(), len(items)) {
			omitZeroStructs(v.Index(i), items[i])
		}
	case reflect.Map:
		m, ok := doc.(map[string]any)
		if !ok || v.Type().Key().Kind() != reflect.String {
			return
		}
		for it := v.MapRange(); it.Next(); {
			omitZeroStructs(it.Value(), m[it.Key().String()])
		}
	}
}
