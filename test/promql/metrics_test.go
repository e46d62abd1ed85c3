package promql

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/testing/doctable"
	"github.com/sidecarops/sidecarops/internal/testing/promrules"
)

// othersMetrics are the metrics of others the rules may name, kube-state-metrics' and the API
// server's: whether any replica of the manager runs is a fact about its Deployment, and a pod the API
// server let through without calling the webhook one about the API server, which no metric of the
// manager itself can state.
var othersMetrics = map[string]bool{
	"kube_deployment_status_replicas_available":   true,
	"apiserver_admission_webhook_fail_open_count": true,
}

// documented are the metrics a table of the heading of docs/doc lists, by name, with their labels.
func documented(t *testing.T, doc, heading string) map[string][]string {
	t.Helper()
	md, err := doctable.Doc(doc)
	require.NoError(t, err)
	metrics, err := doctable.MetricsUnder(md, heading)
	require.NoError(t, err)
	require.NotEmpty(t, metrics, "docs/%s, %q: no metric", doc, heading)
	return metrics
}

// Every expression of the alerting rules and of the dashboard parses with Prometheus' parser and
// names only metrics, and labels, that the manager or the agent registers — the tables of
// docs/operations.md and docs/agent.md, which manager's TestOperationsTablesMatchTheCode and agent's
// TestMetricsAreDocumented hold to the registries the binaries serve — or kube-state-metrics' and the
// API server's allowed above.
func TestAlertsAndDashboardUseRegisteredMetrics(t *testing.T) {
	agents := documented(t, "agent.md", "9. Metrics")
	registered := documented(t, "operations.md", "Metrics")
	for m, l := range agents {
		require.NotContains(t, registered, m, "both binaries' docs list it")
		registered[m] = l
	}
	owned := func(m string) bool { return !othersMetrics[m] }

	exprs, err := promrules.Expressions()
	require.NoError(t, err, "the rules and the dashboard, valid JSON")
	used := map[string]bool{}
	agentUses := 0
	for where, expr := range exprs {
		uses, aggs, err := Parse(expr)
		if !assert.NoError(t, err, where) {
			continue
		}
		for _, u := range uses {
			used[u.Metric] = true
			if _, ok := Labels(u.Metric, agents); ok {
				agentUses++
			}
		}
		assert.Empty(t, Check(uses, aggs, registered, owned), "%s: %s", where, expr)
	}
	for m := range othersMetrics {
		assert.True(t, used[m], "%s is allowed but no rule uses it: drop it from the allow-list", m)
	}
	require.NotZero(t, agentUses, "no expression names an agent metric: the agent's are not checked")
}
