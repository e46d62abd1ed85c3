package promql

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Check finds what the monitoring tests rely on it to find.
func TestCheck(t *testing.T) {
	registered := map[string][]string{
		"decisions_total":  {"result"},
		"duration_seconds": {"webhook"},
	}
	owned := func(m string) bool { return m != "kube_thing" }
	for _, tc := range []struct {
		expr     string
		problems []string
	}{
		{`sum by (result) (rate(decisions_total{result="error"}[5m]))`, nil},
		{`histogram_quantile(0.99, sum by (webhook, le) (rate(duration_seconds_bucket{webhook="/p"}[5m])))`, nil},
		{`sum(rate(duration_seconds_count[5m])) / sum(rate(duration_seconds_sum[5m]))`, nil},
		{`max by (pod) (decisions_total)`, nil},
		{`kube_thing{deployment="x"} < 1`, nil},
		{`rate(decision_total[5m])`, []string{"decision_total is not registered"}},
		{`rate(decisions_total{webhook="/p"}[5m])`, []string{"decisions_total has no label webhook"}},
		{`sum by (webhook) (rate(decisions_total[5m]))`, []string{"grouping by webhook: none of [decisions_total] has it"}},
		{`sum by (le) (rate(decisions_total_bucket[5m]))`, []string{"decisions_total_bucket is not registered", "grouping by le: none of [decisions_total_bucket] has it"}},
	} {
		uses, aggs, err := Parse(tc.expr)
		require.NoError(t, err, tc.expr)
		assert.Equal(t, tc.problems, Check(uses, aggs, registered, owned), tc.expr)
	}
	_, _, err := Parse(`rate(decisions_total[5m]`)
	assert.Error(t, err, "unbalanced")
	_, _, err = Parse(`1 + 1`)
	assert.Error(t, err, "no metric")
}
