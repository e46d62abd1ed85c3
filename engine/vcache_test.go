package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/stretchr/testify/require"
)

// smallCache answers as OPA's own cache does, over random sequences of every call: frames pushed
// and popped in pairs, entries defined, marked undefined, both, or redefined, refs the caller
// changes after Put (as the evaluator does with its buffers), and more entries than the list holds,
// so that some sequences move to OPA's cache midway. One cache serves every run, reset in between,
// as evaluations reuse it (evalState).
func TestSmallCacheAnswersAsOPAs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	refs := make([]ast.Ref, 40)
	for i := range refs {
		// Shared prefixes, as rules of one package and calls of one function have.
		refs[i] = ast.MustParseRef(fmt.Sprintf("data.p%d.r%d", i%3, i%(len(refs)/2)))
		if i >= len(refs)/2 {
			refs[i] = append(refs[i], ast.StringTerm(fmt.Sprint("arg", i)))
		}
	}
	keys := func(c topdown.VirtualCache) []string {
		var out []string
		for _, k := range c.Keys() {
			out = append(out, k.String())
		}
		slices.Sort(out)
		return out
	}
	grown := 0
	small := &smallCache{}
	for run := range 2000 {
		small.reset()
		want := topdown.NewVirtualCache()
		depth := 0
		// Short runs use a few refs and stay small; long ones grow past the list.
		n, pool := 1+r.IntN(150), 1+r.IntN(len(refs))
		for step := range n {
			where := fmt.Sprintf("run %d step %d", run, step)
			ref := refs[r.IntN(pool)]
			switch op := r.IntN(10); {
			case op == 0:
				small.Push()
				want.Push()
				depth++
			case op == 1 && depth > 0:
				small.Pop()
				want.Pop()
				depth--
			case op <= 4:
				var v *ast.Term
				if r.IntN(4) > 0 {
					v = ast.IntNumberTerm(r.IntN(100))
				}
				// The evaluator passes a buffer it writes again: the cache must keep its own.
				buf := slices.Clone(ref)
				small.Put(buf, v)
				want.Put(ref, v)
				buf[len(buf)-1] = ast.StringTerm("overwritten")
			default:
				gv, gu := small.Get(ref)
				wv, wu := want.Get(ref)
				require.Equal(t, wu, gu, "%s: Get(%v) undefined", where, ref)
				require.True(t, gv.Equal(wv), "%s: Get(%v) = %v, want %v", where, ref, gv, wv)
			}
			require.Equal(t, keys(want), keys(small), "%s: Keys", where)
		}
		if small.big != nil {
			grown++
		}
	}
	require.Greater(t, grown, 100, "too few runs went past the list")
}
