package injector

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/internal/testing/fieldreads"
	"github.com/sidecarops/sidecarops/policies"
)

// The per-pod cache keys pods without the fields of its ignored set (Cache.lookup), by hand: a
// pod field that a policy or the mutation reads must not be in it, or a pod would be answered with
// another's answer. The policies' reads are the input.pod references of the shipped policies and
// the administrators' gates of the snapshot; the mutation's are read from its sources (and those
// of every function of the module it calls). This package reads them only as the cache itself
// does (whether they are empty, which the key keeps; their values put back into a reused pod),
// which TestCacheChangesNothing checks. If this fails, take the field out of the ignored set or
// stop reading it.
func TestCacheIgnoresNothingRead(t *testing.T) {
	admin := gates(t)
	var c Cache
	c.lookup(snapshotOf(t, []*bundle.Bundle{admin}), "shop", []byte(`{}`))
	require.NotEmpty(t, c.ignored, "the cache ignores nothing: the guard proves nothing")

	mutation := fieldreads.Of(t, reflect.TypeFor[corev1.Pod](), "github.com/sidecarops/sidecarops/mutation")
	_, ok := mutation[fieldreads.Read{Type: "k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta", Field: "Annotations"}]
	require.True(t, ok, "the analysis misses the mutation's reads of the pod's annotations: it proves nothing")
	modules := policies.Modules()
	for _, m := range admin.Modules {
		modules[m.Path] = string(m.Raw)
	}
	var policyReads [][]string
	for name, src := range modules {
		m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		require.NoError(t, err)
		ast.WalkRefs(m, func(ref ast.Ref) bool {
			if ref.HasPrefix(ast.MustParseRef("input.pod")) {
				policyReads = append(policyReads, keys(ref[2:]))
			}
			return false
		})
	}
	require.NotEmpty(t, policyReads, "no policy reads the pod: the scan proves nothing")

	for _, ignored := range c.ignored {
		path := []string{"metadata", ignored}
		field := goField(t, reflect.TypeFor[corev1.Pod](), path)
		if at, ok := mutation[field]; ok {
			t.Errorf("the cache ignores %s, which the mutation reads (%s.%s at %s)", ignored, field.Type, field.Field, at)
		}
		for _, read := range policyReads {
			if n := min(len(read), len(path)); slices.Equal(read[:n], path[:n]) {
				t.Errorf("the cache ignores %s, which a policy reads (input.pod.%s)", ignored, strings.Join(read, "."))
			}
		}
	}
}

// keys is ref's leading string keys: where under input.pod it reads (a variable or a call below
// them reads everything there).
func keys(ref ast.Ref) []string {
	var out []string
	for _, term := range ref {
		s, ok := term.Value.(ast.String)
		if !ok {
			break
		}
		out = append(out, string(s))
	}
	return out
}

// goField is the Go field that the JSON path names in t.
func goField(tb testing.TB, t reflect.Type, path []string) fieldreads.Read {
	tb.Helper()
	for i, key := range path {
		in, f, ok := jsonField(t, key)
		if !ok {
			tb.Fatalf("%s has no JSON field %q", t, key)
		}
		if i == len(path)-1 {
			return fieldreads.Read{Type: fieldreads.TypeName(in), Field: f.Name}
		}
		t = f.Type
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	tb.Fatal("an empty path")
	return fieldreads.Read{}
}

// jsonField is the field encoded as key in t, and the struct that declares it: t or a struct
// embedded in it without a name of its own, as encoding/json reads them.
func jsonField(t reflect.Type, key string) (reflect.Type, reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			if in, inner, ok := jsonField(f.Type, key); ok {
				return in, inner, true
			}
		}
		if name == key {
			return t, f, true
		}
	}
	return nil, reflect.StructField{}, false
}
