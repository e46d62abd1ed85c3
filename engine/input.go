package engine

import (
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/tidwall/gjson"
)

// input builds the pod decision input {"namespace": ns, "pod": pod} from the pod's JSON.
//
// This runs once per admission and used to cost more than evaluating the policies: OPA's own
// ast.ValueFromReader decodes into interface{} values first and converts them after. Walking the
// JSON with gjson builds the AST terms directly, in one pass, with a fraction of the allocations.
func input(namespace string, podJSON []byte) (ast.Value, error) {
	if !gjson.ValidBytes(podJSON) {
		return nil, errors.New("engine: pod JSON: not valid JSON")
	}
	root := gjson.ParseBytes(podJSON)
	if !root.IsObject() {
		return nil, fmt.Errorf("engine: pod JSON: want an object, got %s", root.Type)
	}
	return ast.NewObject(
		[2]*ast.Term{ast.InternedTerm("namespace"), ast.StringTerm(namespace)},
		[2]*ast.Term{ast.InternedTerm("pod"), ast.NewTerm(jsonValue(root))},
	), nil
}

// jsonValue converts a validated gjson value into an AST value. Numbers keep their JSON text, as
// OPA's JSON decoding does (json.Number), so no precision is lost.
func jsonValue(r gjson.Result) ast.Value {
	switch {
	case r.IsObject():
		obj := ast.NewObject()
		r.ForEach(func(k, v gjson.Result) bool {
			obj.Insert(ast.StringTerm(k.Str), ast.NewTerm(jsonValue(v)))
			return true
		})
		return obj
	case r.IsArray():
		var terms []*ast.Term
		r.ForEach(func(_, v gjson.Result) bool {
			terms = append(terms, ast.NewTerm(jsonValue(v)))
			return true
		})
		return ast.NewArray(terms...)
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
