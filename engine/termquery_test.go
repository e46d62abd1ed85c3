package engine

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/stretchr/testify/require"
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
