package manager

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/testing/doctable"
	"github.com/sidecarops/sidecarops/internal/testing/promrules"
)

// runbook is where every alert points: its own section of docs/operations.md, whose heading
// test/manifests' TestRunbookAnchorsExist finds.
const runbook = "https://github.com/sidecarops/sidecarops/blob/main/docs/operations.md#"

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
