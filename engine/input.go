package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/tidwall/gjson"
	corev1 "k8s.io/api/core/v1"
)

// projection is the part of the pod the compiled policies can read: a tree of object keys under
// input.pod, where a node marked all stands for its whole subtree.
//
// Converting a pod into OPA's AST costs more than evaluating the match decision itself. The policies
// (ours and administrators') are fixed for a snapshot, so the paths they read are known when it is
// prepared; per admission only those subtrees are converted. Any reference the analysis cannot
// bound (input or input.pod as a whole, a computed key) widens the projection to the whole pod.
type projection struct {
	all      bool
	children map[string]*projection
	// path is the node's key escaped for gjson, and key its term in the input, both made once:
	// every admission looks the one up and inserts the other (terms are never modified).
	path string
	key  *ast.Term
	// typed, on the root, says typedInput can build every path from a decoded pod; parent, on a
	// parent of typedParents, is that; build, on one of its fields, how (podTyped).
	typed  bool
	parent *typedParent
	build  typedField
}

// podProjection collects the paths under input.pod referenced by the modules, added to those of
// from (nil: none), which it leaves as it was.
func podProjection(from *projection, modules ...map[string]*ast.Module) *projection {
	root := from.clone()
	for m := range all(modules) {
		ast.WalkRefs(m, func(r ast.Ref) bool {
			if !r[0].Equal(ast.InputRootDocument) {
				return false
			}
			if len(r) == 1 {
				root.add(nil) // input itself
				return false
			}
			key, ok := r[1].Value.(ast.String)
			if !ok {
				root.add(nil)
				return false
			}
			if key != "pod" {
				return false
			}
			var path []string
			for _, t := range r[2:] {
				s, ok := t.Value.(ast.String)
				if !ok {
					break // a variable or number: everything below this point
				}
				path = append(path, string(s))
			}
			root.add(path)
			return false
		})
	}
	root.typed = podTyped(root)
	return root
}

func (p *projection) clone() *projection {
	if p == nil {
		return &projection{}
	}
	c := &projection{all: p.all, path: p.path, key: p.key}
	if p.children != nil {
		c.children = make(map[string]*projection, len(p.children))
		for k, child := range p.children {
			c.children[k] = child.clone()
		}
	}
	return c
}

// add marks path as read; an empty path is the whole pod.
func (p *projection) add(path []string) {
	n := p
	for _, k := range path {
		if n.all {
			return
		}
		if n.children == nil {
			n.children = map[string]*projection{}
		}
		c, ok := n.children[k]
		if !ok {
			c = &projection{path: gjsonPath(k), key: ast.StringTerm(k)}
			n.children[k] = c
		}
		n = c
	}
	n.all, n.children = true, nil
}

// reads reports whether path, or a part of it, is in the projection.
func (p *projection) reads(path []string) bool {
	n := p
	for _, k := range path {
		if n.all {
			return true
		}
		if n = n.children[k]; n == nil {
			return false
		}
	}
	return true
}

// deterministic reports whether no module calls a builtin OPA marks non-deterministic. A call is
// an expression's operator or a term nested in one; both are walked.
func deterministic(modules ...map[string]*ast.Module) bool {
	nondeterministic := func(op ast.Ref) bool {
		b, ok := ast.BuiltinMap[op.String()]
		return ok && b.Nondeterministic
	}
	found := false
	for m := range all(modules) {
		ast.WalkExprs(m, func(e *ast.Expr) bool {
			found = found || (e.IsCall() && nondeterministic(e.Operator()))
			return found
		})
		ast.WalkTerms(m, func(t *ast.Term) bool {
			if c, ok := t.Value.(ast.Call); ok && len(c) > 0 {
				if op, ok := c[0].Value.(ast.Ref); ok {
					found = found || nondeterministic(op)
				}
			}
			return found
		})
	}
	return !found
}

var (
	sidecarSetPolicies = ast.MustParseRef("data.sidecarsets")
	governanceRef      = ast.MustParseRef("data.sidecarops.governance")
)

// podModules are the modules the pod decisions may evaluate: all but the SidecarSet policies
// (packages under sidecarsets, and ours that gathers them), which run at SidecarSet admission
// only. The pod path's projection and determinism are the pod modules' alone, which holds only if
// none of them reads a SidecarSet policy: such a bundle is refused.
func podModules(modules map[string]*ast.Module) (map[string]*ast.Module, error) {
	out := make(map[string]*ast.Module, len(modules))
	for name, m := range modules {
		if p := m.Package.Path; p.HasPrefix(sidecarSetPolicies) || p.Equal(governanceRef) {
			continue
		}
		var read ast.Ref
		ast.WalkRefs(m, func(r ast.Ref) bool {
			if read == nil && (r.HasPrefix(sidecarSetPolicies) || r.HasPrefix(governanceRef)) {
				read = r
			}
			return read != nil
		})
		if read != nil {
			return nil, fmt.Errorf("engine: %s (package %v) reads %v: only SidecarSet policies (packages under sidecarsets) may read them", name, m.Package.Path, read)
		}
		out[name] = m
	}
	return out, nil
}

// all iterates the modules of several module maps.
func all(sets []map[string]*ast.Module) iter.Seq[*ast.Module] {
	return func(yield func(*ast.Module) bool) {
		for _, set := range sets {
			for _, m := range set {
				if !yield(m) {
					return
				}
			}
		}
	}
}

// value converts the projected part of r. r may point into its caller's bytes; a subtree converted
// whole is copied first, so that the strings of the AST are its own.
func (p *projection) value(r gjson.Result) ast.Value {
	if p.all || !r.IsObject() {
		return jsonValue(gjson.Parse(strings.Clone(r.Raw)))
	}
	obj := ast.NewObjectWithCapacity(len(p.children))
	for _, c := range p.children {
		if v := r.Get(c.path); v.Exists() {
			obj.Insert(c.key, ast.NewTerm(c.value(v)))
		}
	}
	return obj
}

// gjsonPath escapes a key for gjson, whose path syntax gives meaning to '.', '*', '?', '|', '#',
// '@' and more; a backslash makes any character literal.
func gjsonPath(key string) string {
	var b strings.Builder
	for _, c := range []byte(key) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// input builds the pod decision input {"namespace": ns, "pod": pod} from the pod's JSON, converting
// only what proj says the policies read. Walking the JSON with gjson builds AST terms directly, in
// one pass, instead of decoding into interface{} values and converting those.
func input(proj *projection, namespace string, podJSON []byte) (ast.Value, error) {
	// encoding/json's scanner, not gjson's validator: gjson's recursion grows the stack with the
	// nesting depth, so a deep enough document crashes the process.
	// encoding/json refuses more than 10,000 levels, and the conversion below recurses no deeper.
	if !json.Valid(podJSON) {
		return nil, errors.New("engine: pod JSON: not valid JSON")
	}
	return decodedInput(proj, namespace, podJSON)
}

// decodedInput is input for JSON known to be valid. The pod's JSON is walked in place: parsing a
// copy (gjson.ParseBytes) cost an allocation of the whole pod per admission, where the policies
// read a few of its fields. value copies what it converts, so the AST never points into podJSON.
func decodedInput(proj *projection, namespace string, podJSON []byte) (ast.Value, error) {
	root := gjson.Parse(unsafe.String(unsafe.SliceData(podJSON), len(podJSON))) //nolint:gosec // G103: read only; value copies what it keeps
	if !root.IsObject() {
		return nil, fmt.Errorf("engine: pod JSON: want an object, got %s", root.Type)
	}
	return ast.NewObject(
		[2]*ast.Term{keyNamespace, ast.StringTerm(namespace)},
		[2]*ast.Term{keyPod, ast.NewTerm(proj.value(root))},
	), nil
}

// The input's keys, made once: OPA does not intern these strings, and ast.InternedTerm made two
// terms of each per admission.
var (
	keyNamespace = ast.StringTerm("namespace")
	keyPod       = ast.StringTerm("pod")
)

// jsonValue converts a validated gjson value into an AST value. Numbers keep their JSON text, as
// OPA's JSON decoding does (json.Number), so no precision is lost. The members of an object or
// array are counted first, so that their terms are one allocation and the collection is sized once:
// a pod's labels cost far fewer allocations than term by term (BenchmarkPerPod).
func jsonValue(r gjson.Result) ast.Value {
	switch {
	case r.IsObject():
		terms := make([]ast.Term, 2*members(r))
		obj := ast.NewObjectWithCapacity(len(terms) / 2)
		i := 0
		r.ForEach(func(k, v gjson.Result) bool {
			terms[i].Value, terms[i+1].Value = ast.String(k.Str), jsonValue(v)
			obj.Insert(&terms[i], &terms[i+1])
			i += 2
			return true
		})
		return obj
	case r.IsArray():
		terms := make([]ast.Term, members(r))
		elems := make([]*ast.Term, len(terms))
		i := 0
		r.ForEach(func(_, v gjson.Result) bool {
			terms[i].Value = jsonValue(v)
			elems[i] = &terms[i]
			i++
			return true
		})
		return ast.NewArray(elems...)
	}
	switch r.Type {
	case gjson.String:
		return ast.String(r.Str)
	case gjson.Number:
		return ast.Number(r.Raw)
	case gjson.True:
		return ast.Boolean(true)
	case gjson.False:
		return ast.Boolean(false)
	default:
		return ast.Null{}
	}
}

// members counts the members of an object or the elements of an array.
func members(r gjson.Result) int {
	n := 0
	r.ForEach(func(_, _ gjson.Result) bool {
		n++
		return true
	})
	return n
}

// typedField builds one field of the pod from the decoded pod for typedInput: ok false when the
// decoded pod cannot tell what the JSON holds there, v nil when the JSON has no such field.
type typedField func(node *projection, pod *corev1.Pod, podJSON []byte) (v ast.Value, ok bool)

// typedParent is an object of the pod that typedInput builds from the decoded pod: the fields it
// can build, and whether the decoded pod shows that the JSON has the object when none of them is
// there; quoted is its name in quotes.
type typedParent struct {
	fields  map[string]typedField
	present func(*corev1.Pod) bool
	quoted  string
}

// typedParents are the pod fields typedInput builds from a decoded pod, by parent: what our
// policies and the gates of examples/policies read. Below them lies a label or annotation key, or
// nothing: a value is a string or a boolean, converted whole.
var typedParents = map[string]*typedParent{
	"metadata": {
		quoted: `"metadata"`,
		fields: map[string]typedField{
			"labels": func(n *projection, p *corev1.Pod, raw []byte) (ast.Value, bool) {
				return stringMap(n, p.Labels, raw, `"labels"`)
			},
			"annotations": func(n *projection, p *corev1.Pod, raw []byte) (ast.Value, bool) {
				return stringMap(n, p.Annotations, raw, `"annotations"`)
			},
			"name": func(_ *projection, p *corev1.Pod, raw []byte) (ast.Value, bool) {
				return stringValue(p.Name, raw, `"name"`)
			},
			"generateName": func(_ *projection, p *corev1.Pod, raw []byte) (ast.Value, bool) {
				return stringValue(p.GenerateName, raw, `"generateName"`)
			},
		},
		// Not the namespace, which the caller may have defaulted.
		present: func(p *corev1.Pod) bool {
			return p.Name != "" || p.GenerateName != "" || p.UID != "" || len(p.Labels) > 0 || len(p.Annotations) > 0
		},
	},
	"spec": {
		quoted:  `"spec"`,
		fields:  map[string]typedField{"hostNetwork": hostNetwork},
		present: func(p *corev1.Pod) bool { return len(p.Spec.Containers) > 0 || p.Spec.HostNetwork },
	},
}

// podTyped reports whether every path of root, a pod's projection, is one of typedParents', and
// gives each field's node its builder.
func podTyped(root *projection) bool {
	if root.all {
		return false
	}
	for name, node := range root.children {
		parent, ok := typedParents[name]
		if !ok || node.all {
			return false
		}
		for field, c := range node.children {
			if c.build = parent.fields[field]; c.build == nil {
				return false
			}
		}
		node.parent = parent
	}
	return true
}

// typedInput is decodedInput(proj, namespace, podJSON) built from pod, which a decoder that refuses
// duplicate names and tells names apart by case (the webhook's) decoded from podJSON, or which was
// marshalled into it. It reads the pod's fields instead of scanning its JSON, which cost more than
// converting them: the labels come after a kilobyte of metadata. ok is false, and nothing is built,
// when proj reads a field outside typedParents, or one whose decoded value cannot say exactly what
// the JSON holds: a decoded pod has no absent, null or empty field of its own (an empty map or
// string, a false hostNetwork), unless the JSON does not name it at all (absent), and decoders write
// U+FFFD for invalid UTF-8, which gjson keeps. decodedInput then reads the JSON. TestTypedInput
// holds the two together.
//
// pod.Namespace is not read: the caller may have defaulted it.
func typedInput(proj *projection, namespace string, pod *corev1.Pod, podJSON []byte) (ast.Value, bool) {
	if !proj.typed {
		return nil, false
	}
	// The terms of the namespace, the pod and its objects and fields are one allocation.
	n := 2
	for _, node := range proj.children {
		n += 1 + len(node.children)
	}
	terms := termBlock(make([]ast.Term, n))
	var buf [2][2]*ast.Term // metadata and spec
	parents := buf[:0]
	for _, node := range proj.children {
		v, ok := typedObject(node, pod, podJSON, &terms)
		if !ok {
			return nil, false
		}
		if v != nil {
			parents = append(parents, [2]*ast.Term{node.key, terms.term(v)})
		}
	}
	return ast.NewObject(
		[2]*ast.Term{keyNamespace, terms.term(ast.String(namespace))},
		[2]*ast.Term{keyPod, terms.term(ast.NewObject(parents...))},
	), true
}

// termBlock hands out terms from one allocation, as many as it was made with.
type termBlock []ast.Term

func (b *termBlock) term(v ast.Value) *ast.Term {
	t := &(*b)[0]
	*b = (*b)[1:]
	t.Value = v
	return t
}

// typedObject builds metadata or spec, node, from the pod's fields; nil when the JSON has no such
// object.
func typedObject(node *projection, pod *corev1.Pod, podJSON []byte, terms *termBlock) (ast.Value, bool) {
	var buf [4][2]*ast.Term // the most fields of a parent in typedParents
	fields := buf[:0]
	for _, c := range node.children {
		v, ok := c.build(c, pod, podJSON)
		if !ok {
			return nil, false
		}
		if v != nil {
			fields = append(fields, [2]*ast.Term{c.key, terms.term(v)})
		}
	}
	// A field the JSON has is in an object; without one, the object may be absent or null.
	if len(fields) == 0 && !node.parent.present(pod) {
		return nil, absent(podJSON, node.parent.quoted)
	}
	return ast.NewObject(fields...), true
}

// stringMap builds labels or annotations, node, from m, named quoted in the JSON. An empty m is
// absent, null or {} in the JSON (json.Marshal omits an empty map).
func stringMap(node *projection, m map[string]string, podJSON []byte, quoted string) (ast.Value, bool) {
	if len(m) == 0 {
		return nil, absent(podJSON, quoted)
	}
	if !node.all { // some keys
		var buf [4][2]*ast.Term
		pairs := buf[:0]
		for k, c := range node.children {
			if v, ok := m[k]; ok {
				if !faithful(k) || !faithful(v) {
					return nil, false
				}
				pairs = append(pairs, [2]*ast.Term{c.key, ast.StringTerm(v)})
			}
		}
		return ast.NewObject(pairs...), true
	}
	// As in jsonValue, the terms are one allocation.
	terms := make([]ast.Term, 2*len(m))
	var buf [16][2]*ast.Term
	pairs := buf[:0]
	for k, v := range m {
		if !faithful(k) || !faithful(v) {
			return nil, false
		}
		i := 2 * len(pairs)
		terms[i].Value, terms[i+1].Value = ast.String(k), ast.String(v)
		pairs = append(pairs, [2]*ast.Term{&terms[i], &terms[i+1]})
	}
	return ast.NewObject(pairs...), true
}

// stringValue builds a string field named quoted in the JSON; an empty one is absent or "" there.
func stringValue(s string, podJSON []byte, quoted string) (ast.Value, bool) {
	if s == "" {
		return nil, absent(podJSON, quoted)
	}
	if !faithful(s) {
		return nil, false
	}
	return ast.String(s), true
}

// hostNetwork builds spec.hostNetwork. false is absent, null or false in the JSON, which a policy
// may tell apart.
func hostNetwork(_ *projection, pod *corev1.Pod, podJSON []byte) (ast.Value, bool) {
	if pod.Spec.HostNetwork {
		return ast.Boolean(true), true
	}
	return nil, absent(podJSON, `"hostNetwork"`)
}

// absent reports whether the JSON has no member named quoted (the name in quotes), nowhere in it:
// the name is not in its text, and no string is escaped (a name spelt with an escape has a \u in
// it). An absent field is then certain, without parsing: a decoded pod's empty field is that, or
// null, or empty, and the policies tell those apart.
func absent(podJSON []byte, quoted string) bool {
	return !bytes.Contains(podJSON, []byte(quoted)) && !bytes.Contains(podJSON, []byte(`\u`))
}

// faithful reports whether s, decoded, is what gjson reads in the JSON it was decoded from or
// marshalled into: valid UTF-8 without U+FFFD, which decoders and json.Marshal write for invalid
// bytes. Label and annotation keys and values are ASCII, checked byte by byte.
func faithful(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return utf8.ValidString(s) && !strings.ContainsRune(s, utf8.RuneError)
		}
	}
	return true
}
