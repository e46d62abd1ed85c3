package engine

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
)

// A query's value outlives the evaluation's state, which the next evaluation reuses: even the value
// of a query that answers its input as it is.
func TestTermQueryValueOutlivesEvaluation(t *testing.T) {
	compiler, err := compile(modules("package p\nx := input"))
	require.NoError(t, err)
	q, err := prepareTermQuery(compiler, inmem.New(), "data.p.x")
	require.NoError(t, err)
	ctx := context.Background()
	first, err := q.eval(ctx, ast.String("first"))
	require.NoError(t, err)
	_, err = q.eval(ctx, ast.String("second"))
	require.NoError(t, err)
	require.Equal(t, ast.String("first"), first.Value)
}

// termQuery is rego's PreparedEvalQuery without its per-evaluation context: it must answer what
// rego answers, for our queries on a snapshot and for what administrators' policies may do (builtin
// errors, conflicts, print, time). This fails when rego's preparation or evaluation moves away from
// the one termQuery makes.
func TestTermQueryAnswersAsRego(t *testing.T) {
	ctx := context.Background()
	same := func(t *testing.T, q *termQuery, query string, in ast.Value) {
		t.Helper()
		pq, err := rego.New(rego.Query(query), rego.Compiler(q.compiler), rego.Store(q.store)).PrepareForEval(ctx)
		require.NoError(t, err)
		rs, regoErr := pq.Eval(ctx, rego.EvalParsedInput(in))
		got, err := q.eval(ctx, in)
		if regoErr != nil {
			require.EqualError(t, err, regoErr.Error(), "%s on %v", query, in)
			return
		}
		require.NoError(t, err, "%s on %v", query, in)
		if len(rs) == 0 {
			require.Nil(t, got, "%s on %v: rego says undefined", query, in)
			return
		}
		// rego answers Go values (a set becomes a list): compared as such.
		want := rs[0].Expressions[0].Value
		require.NotNil(t, got, "%s on %v: rego says %v", query, in, want)
		value, err := ast.JSON(got.Value)
		require.NoError(t, err)
		require.Equal(t, want, value, "%s on %v", query, in)
	}

	t.Run("policies", func(t *testing.T) {
		compiler, err := compile(modules(`package p
x := input.a
err := to_number(input.s)
conflict := 1 if input.a
conflict := 2 if input.b
printed := input.a if print("a is", input.a)
now := time.now_ns() > 0
set contains v if some v in input.list
`))
		require.NoError(t, err)
		for _, query := range []string{"data.p.x", "data.p.err", "data.p.conflict", "data.p.printed", "data.p.now", "data.p.set", "data.p"} {
			q, err := prepareTermQuery(compiler, inmem.New(), query)
			require.NoError(t, err)
			for _, in := range []string{`{}`, `{"a":1}`, `{"a":1,"b":true}`, `{"s":"12"}`, `{"s":"twelve"}`, `{"list":[1,2,2]}`} {
				same(t, q, query, ast.MustParseTerm(in).Value)
			}
		}
	})

	t.Run("snapshot", func(t *testing.T) {
		s := snapshot(t, bundles.State{SidecarSets: []*v1beta1.SidecarSet{
			sidecarSet("web", map[string]string{"app": "web"}),
			sidecarSet("all", nil),
			sidecarSet("paused", map[string]string{"app": "web"}, func(ss *v1beta1.SidecarSet) { ss.Spec.InjectionStrategy.Paused = true }),
		}}, adminBundle(t, gates))
		for _, pod := range [][]byte{
			podJSON(t, "shop", map[string]string{"app": "web"}),
			podJSON(t, "shop", nil),
			podJSON(t, "kube-system", map[string]string{"app": "web"}),
			podJSON(t, "shop", map[string]string{"app": "web"}, func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
		} {
			in, err := input(s.podProjection, "shop", pod)
			require.NoError(t, err)
			same(t, s.match, matchQuery, in)
			same(t, s.explain, explainQuery, in)
		}
	})
}
