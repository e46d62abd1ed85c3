package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/testing/promrules"
)

// The alerting rules and the dashboard name only metrics, and labels, of the agent's that it
// registers; manager's TestAlertsAndDashboardUseRegisteredMetrics checks the others, and that every
// expression parses.
func TestAlertsUseRegisteredMetrics(t *testing.T) {
	registered := registeredMetrics(t)
	exprs, err := promrules.Expressions()
	require.NoError(t, err)
	agents := 0
	for where, expr := range exprs {
		uses, aggs, err := promrules.Parse(expr)
		require.NoError(t, err, where)
		for _, u := range uses {
			if promrules.AgentMetric(u.Metric) {
				agents++
			}
		}
		assert.Empty(t, promrules.Check(uses, aggs, registered, promrules.AgentMetric), "%s: %s", where, expr)
	}
	require.NotZero(t, agents, "no expression names an agent metric: the test checks nothing")
}
