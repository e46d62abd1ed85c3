package manifest

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	yaml2 "go.yaml.in/yaml/v2"
	kjson "sigs.k8s.io/json"
)

// typeErrors explains why data does not decode into a value of type t, as field errors with full
// paths, and returns what of data does decode: data without the values that fail (kept; nil when
// data as a whole fails).
//
// The JSON decoder stops at the first type error and names it by struct field names only
// ("spec.containers.ports.containerPort", no indices), and errors from custom unmarshalers such as
// resource.Quantity carry no path at all. So, on that error path only, the document is decoded
// again piece by piece following t, and every value that fails on its own is reported with its
// exact path. Each piece is decoded by the same decoder as the document, so this never disagrees
// with it about what is valid; it only finds where.
//
// A member that fails is left out of kept; an item of an array that fails becomes null, so that
// the items after it keep their indices (and the paths of what is found there later).
func typeErrors(data []byte, t reflect.Type, path string) (errs []fieldError, kept []byte) {
	err := kjson.UnmarshalCaseSensitivePreserveInts(data, reflect.New(t).Interface())
	if err == nil {
		return nil, data
	}
	if !customDecoding(t) {
		var found []fieldError
		var rebuilt []byte
		members := func(elem func(key string) (reflect.Type, bool)) {
			var out []member
			for _, m := range objectMembers(data) {
				et, ok := elem(m.key)
				if !ok {
					out = append(out, m) // an unknown field: strict decoding reports it
					continue
				}
				e, k := typeErrors(m.value, et, joinPath(path, m.key))
				found = append(found, e...)
				if k != nil {
					out = append(out, member{m.key, k})
				}
			}
			rebuilt = encodeObject(out)
		}
		switch dt := deref(t); dt.Kind() {
		case reflect.Struct:
			members(func(key string) (reflect.Type, bool) {
				f, ok := jsonField(dt, key)
				return f.Type, ok
			})
		case reflect.Map:
			members(func(string) (reflect.Type, bool) { return dt.Elem(), true })
		case reflect.Slice, reflect.Array:
			if dt.Elem().Kind() != reflect.Uint8 { // []byte is a base64 string, not an array
				var items []json.RawMessage
				if json.Unmarshal(data, &items) == nil {
					for i, item := range items {
						e, k := typeErrors(item, dt.Elem(), indexPath(path, i))
						found = append(found, e...)
						if k == nil {
							k = []byte("null")
						}
						items[i] = k
					}
					rebuilt, _ = json.Marshal(items)
				}
			}
		}
		if len(found) > 0 {
			return found, rebuilt
		}
	}
	return []fieldError{{field: path, reason: typeReason(data, t, err)}}, nil
}

// encodeObject writes members as a JSON object, in their order.
func encodeObject(ms []member) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(m.key)
		b.Write(key)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// customDecoding reports whether t decodes itself; its inside is then opaque.
func customDecoding(t reflect.Type) bool {
	p := reflect.PointerTo(deref(t))
	return p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler)
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

type member struct {
	key   string
	value json.RawMessage
}

// objectMembers returns the members of a JSON object in document order (so that errors come out in
// the order the user wrote the fields), or nil when data is not an object.
func objectMembers(data []byte) []member {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		ms = append(ms, member{key, value})
	}
	return ms
}

// jsonField finds the field that encoding/json fills from key: by JSON tag name, else by Go name,
// looking into embedded structs (Kubernetes' `json:",inline"`); its Index leads there from t.
// Matching is case-sensitive, as in sigs.k8s.io/json.
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if et := deref(f.Type); et.Kind() == reflect.Struct {
				if inner, ok := jsonField(et, key); ok {
					inner.Index = append([]int{i}, inner.Index...)
					return inner, true
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// maxDepth ends encoding/json's error for nesting past its limit, and tooDeep is what is said instead.
const (
	maxDepth = "exceeded max depth"
	tooDeep  = "nested too deeply: exceeded the JSON decoder's maximum depth"
)

// typeReason phrases a decoding failure as "expected <Go-side type>, got <what the JSON holds>".
// The decoder's own message is the most precise instead for types that decode themselves (e.g.
// resource.Quantity's), and whenever the JSON holds the kind of value expected: then the kind is
// not what is wrong, but, say, a string that is no base64, a number no float64 holds, or nesting
// deeper than the decoder reads.
func typeReason(data []byte, t reflect.Type, err error) string {
	expected, got := expectedName(deref(t)), jsonValueName(data)
	if customDecoding(t) || sameKind(expected, got) {
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if strings.HasSuffix(msg, maxDepth) {
			return tooDeep
		}
		return msg
	}
	return fmt.Sprintf("expected %s, got %s", expected, got)
}

// sameKind reports whether a JSON value jsonValueName calls got is of the kind expectedName calls
// expected.
func sameKind(expected, got string) bool {
	return expected == got || expected == "any value" || expected == "base64 string" && got == "string"
}

func expectedName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "base64 string"
		}
		return "array"
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Interface:
		return "any value"
	}
	return t.Kind().String() // int32, int64, float64, ...: the range is what matters
}

// jsonValueName names what a JSON value is; numbers are shown as written because their kind alone
// does not explain why, e.g., 1.5 or 10000000000 is not an int32.
func jsonValueName(data []byte) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "nothing"
	}
	switch data[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	const limit = 32
	if len(data) > limit {
		return string(data[:limit]) + "..."
	}
	return string(data)
}

// yamlCheck reads a YAML document again for what sigs.k8s.io/yaml's conversion to JSON silently
// drops, using the same YAML library so that both agree on the syntax:
//
//   - keys that appear twice in one mapping: the JSON keeps only the last, so the JSON decoder cannot
//     report them, and apimachinery's YAML strict check reports only a line and a key, not a path.
//     Decoding into ordered MapSlices keeps every key.
//   - content after the document's first node ("{a: 1}" followed by "b: 2"), which the conversion
//     ignores. A second Decode finds it as a syntax error with its line.
func yamlCheck(text []byte) ([]fieldError, error) {
	dec := yaml2.NewDecoder(bytes.NewReader(text))
	var doc yaml2.MapSlice
	var te *yaml2.TypeError
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) && !errors.As(err, &te) {
		return nil, err // a TypeError only means the document is not a mapping; the caller says so
	}
	var dups []fieldError
	walkYAML(doc, "", &dups)
	var rest any
	switch err := dec.Decode(&rest); {
	case errors.Is(err, io.EOF):
		return dups, nil
	case err == nil:
		return nil, errors.New("more than one YAML document; separate documents with a \"---\" line")
	default:
		return nil, err
	}
}

func walkYAML(v any, path string, out *[]fieldError) {
	switch v := v.(type) {
	case yaml2.MapSlice:
		seen := make(map[string]int, len(v))
		for _, item := range v {
			// fmt.Sprint renders non-string keys (1, true) as the JSON conversion does.
			key := fmt.Sprint(item.Key)
			p := joinPath(path, key)
			if seen[key]++; seen[key] == 2 {
				*out = append(*out, fieldError{field: p, reason: "duplicate field"})
			}
			walkYAML(item.Value, p, out)
		}
	case []any:
		for i, x := range v {
			walkYAML(x, indexPath(path, i), out)
		}
	}
}
