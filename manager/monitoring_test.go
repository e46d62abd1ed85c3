package manager

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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

// runbook is where every alert points: its own section of docs/operations.md, whose heading
// test/manifests' TestRunbookAnchorsExist finds.
const runbook = "https://github.com/sidecarops/sidecarops/blob/main/docs/operations.md#"

// Every expression of the alerting rules and of the dashboard parses with Prometheus' parser and
// names only metrics, and labels, that the manager registers (on the registry it serves, as
// manager.go builds it) — or the agent, or kube-state-metrics and the API server where allowed above.
func TestAlertsAndDashboardUseRegisteredMetrics(t *testing.T) {
	rec := &doctable.Recorder{Registerer: prometheus.NewRegistry()}
	_, err := newComponentMetrics(rec)
	require.NoError(t, err)
	registered, err := doctable.Described(rec.Collectors...)
	require.NoError(t, err)
	// The agent's are agent's TestAlertsUseRegisteredMetrics's to check, against its registry.
	owned := func(m string) bool { return !promrules.AgentMetric(m) && !othersMetrics[m] }

	exprs, err := promrules.Expressions()
	require.NoError(t, err, "the rules and the dashboard, valid JSON")
	used := map[string]bool{}
	for where, expr := range exprs {
		uses, aggs, err := promrules.Parse(expr)
		if !assert.NoError(t, err, where) {
			continue
		}
		for _, u := range uses {
			used[u.Metric] = true
		}
		assert.Empty(t, promrules.Check(uses, aggs, registered, owned), "%s: %s", where, expr)
	}
	for m := range othersMetrics {
		assert.True(t, used[m], "%s is allowed but no rule uses it: drop it from the allow-list", m)
	}
}

// Every alert is complete: a duration, a severity, what it means, what to look at, and the docs.
func TestAlertsAreComplete(t *testing.T) {
	groups, err := promrules.RuleGroups()
	require.NoError(t, err)
	for _, g := range groups {
		require.NotEmpty(t, g.Rules, g.Name)
		for _, r := range g.Rules {
			assert.NoError(t, promrules.ValidFor(r.For), "%s: for %q", r.Alert, r.For)
			assert.Contains(t, []string{"critical", "warning"}, r.Labels["severity"], r.Alert)
			assert.NotEmpty(t, r.Annotations["summary"], r.Alert)
			assert.NotEmpty(t, r.Annotations["description"], r.Alert)
			assert.Equal(t, runbook+strings.ToLower(r.Alert), r.Annotations["runbook_url"], r.Alert)
		}
	}
}

// docs/operations.md's table of alerts is the rules file: the same alerts in the same order, with
// the same expressions, durations, severities and summaries.
func TestOperationsAlertTableIsTheRulesFile(t *testing.T) {
	groups, err := promrules.RuleGroups()
	require.NoError(t, err)
	var want [][]string
	for _, g := range groups {
		for _, r := range g.Rules {
			want = append(want, []string{"`" + r.Alert + "`", "`" + r.Expr + "`", r.For, r.Labels["severity"], r.Annotations["summary"]})
		}
	}

	doc, err := doctable.Doc("operations.md")
	require.NoError(t, err)
	tables, err := doctable.Tables(doc, "Alerts") // the runbook links' #alerts
	require.NoError(t, err)
	var got [][]string
	for _, tb := range tables {
		if len(tb.Header) > 0 && tb.Header[0] == "alert" {
			require.Equal(t, []string{"alert", "expression", "for", "severity", "what it means"}, tb.Header)
			got = append(got, tb.Rows...)
		}
	}
	assert.Equal(t, want, got, "the rules file (-) against docs/operations.md (+)")
}
