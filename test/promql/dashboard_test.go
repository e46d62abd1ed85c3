package promql

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/testing/promrules"
)

// A dashboard panel's unit and queries, each query with the unit Grafana shows it in (the panel's,
// or an override's for its refId).
type dashboardPanel struct {
	Title       string
	FieldConfig struct {
		Defaults  struct{ Unit string }
		Overrides []struct {
			Matcher    struct{ ID, Options string }
			Properties []struct {
				ID    string
				Value any
			}
		}
	}
	Targets []struct{ RefID, Expr string }
	Panels  []dashboardPanel
}

// unitOf is the unit the query with refID is shown in.
func (p dashboardPanel) unitOf(refID string) string {
	unit := p.FieldConfig.Defaults.Unit
	for _, o := range p.FieldConfig.Overrides {
		if o.Matcher.ID == "byFrameRefID" && o.Matcher.Options == refID {
			for _, prop := range o.Properties {
				if u, ok := prop.Value.(string); ok && prop.ID == "unit" {
					unit = u
				}
			}
		}
	}
	return unit
}

// Quantities a query returns, and the Grafana units that show each.
const (
	perSecond = "per second"
	seconds   = "seconds"
	timestamp = "timestamp"
	count     = "count"
	ratio     = "ratio"
)

var grafanaUnits = map[string][]string{
	perSecond: {"reqps", "ops", "cps"},
	seconds:   {"s"},
	timestamp: {"dateTimeAsIso", "dateTimeFromNow"},
	count:     {"short", "none"},
	ratio:     {"percentunit"},
}

// returns is the quantity expr returns, from what it applies to which metric: a rate is per
// second, an increase or a count a count, a histogram's quantile in its metric's unit, a
// difference of timestamps seconds, a quotient of like quantities a ratio.
func returns(t *testing.T, expr parser.Node) string {
	t.Helper()
	switch e := expr.(type) {
	case *parser.ParenExpr:
		return returns(t, e.Expr)
	case *parser.AggregateExpr:
		if e.Op == parser.COUNT {
			return count
		}
		return returns(t, e.Expr)
	case *parser.Call:
		switch e.Func.Name {
		case "rate", "irate":
			return perSecond
		case "increase", "changes", "resets":
			return count
		case "time":
			return timestamp
		case "histogram_quantile":
			var unit string
			parser.Inspect(e.Args[1], func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					unit = returns(t, &parser.VectorSelector{Name: strings.TrimSuffix(vs.Name, "_bucket")})
				}
				return nil
			})
			return unit
		}
	case *parser.BinaryExpr:
		lhs, rhs := returns(t, e.LHS), returns(t, e.RHS)
		switch {
		case e.Op.IsComparisonOperator() || e.Op.IsSetOperator():
			return lhs
		case e.Op == parser.SUB && lhs == timestamp && rhs == timestamp:
			return seconds
		case e.Op == parser.DIV && lhs == rhs:
			return ratio
		case e.Op == parser.ADD || e.Op == parser.SUB:
			return lhs
		}
	case *parser.MatrixSelector:
		return returns(t, e.VectorSelector)
	case *parser.VectorSelector:
		switch {
		case strings.HasSuffix(e.Name, "_timestamp_seconds"):
			return timestamp
		case strings.HasSuffix(e.Name, "_seconds"):
			return seconds
		}
		return count
	case *parser.NumberLiteral:
		return count
	}
	require.FailNow(t, "no unit known", "%s", expr)
	return ""
}

// The dashboard's cluster variable narrows every query, All matching series without the label; and
// every query is shown in the unit of what it returns.
func TestDashboard(t *testing.T) {
	raw, err := promrules.Read(promrules.DashboardFile)
	require.NoError(t, err)
	var d struct {
		Templating struct {
			List []struct {
				Name, Type, AllValue string
				IncludeAll, Multi    bool
				Definition           string
			}
		}
		Panels []dashboardPanel
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	var cluster bool
	for _, v := range d.Templating.List {
		if v.Name == "cluster" {
			cluster = true
			assert.Equal(t, "query", v.Type)
			assert.True(t, v.IncludeAll && v.Multi, "All, and several clusters at once")
			assert.Equal(t, ".*", v.AllValue, "All matches series without a cluster label (one cluster's Prometheus)")
			assert.Equal(t, "label_values(sidecarops_build_info, cluster)", v.Definition)
		}
	}
	require.True(t, cluster, "a cluster variable")

	p := parser.NewParser(parser.Options{})
	var queries int
	var walk func([]dashboardPanel)
	walk = func(panels []dashboardPanel) {
		for _, panel := range panels {
			for _, target := range panel.Targets {
				queries++
				where := panel.Title + " " + target.RefID
				expr, err := p.ParseExpr(target.Expr)
				require.NoError(t, err, where)
				parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
					if vs, ok := n.(*parser.VectorSelector); ok {
						assert.True(t, slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
							return m.Name == "cluster" && m.Type == labels.MatchRegexp && m.Value == "$cluster"
						}), "%s: %s selects no cluster=~\"$cluster\"", where, vs)
					}
					return nil
				})
				quantity := returns(t, expr)
				assert.Contains(t, grafanaUnits[quantity], panel.unitOf(target.RefID), "%s: %s returns %s", where, target.Expr, quantity)
			}
			walk(panel.Panels)
		}
	}
	walk(d.Panels)
	require.NotZero(t, queries)
}
