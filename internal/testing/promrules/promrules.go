// Package promrules reads the monitoring files of config/components/monitoring — the alerting rules
// and the Grafana dashboard — and the metrics their PromQL names, so that tests can hold them to the
// metrics the binaries register and to docs/operations.md.
package promrules

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/internal/testing/doctable"
)

// Dir is where the files are, from the module's root; `make generate` copies them into the chart.
const Dir = "config/components/monitoring"

// Files, in Dir: the PrometheusRule and the dashboard.
const (
	RulesFile     = "prometheus-rules.yaml"
	DashboardFile = "dashboard.json"
)

// A Rule is an alerting rule of the rules file.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// A Group is a rule group of the rules file.
type Group struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Read reads file of Dir.
func Read(file string) ([]byte, error) {
	root, err := doctable.Root()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(root, Dir, file))
}

// Groups are the rule groups of a PrometheusRule, strictly decoded: a field misspelt is an error,
// not a rule without it.
func Groups(prometheusRule []byte) ([]Group, error) {
	var pr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Groups []Group `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(prometheusRule, &pr); err != nil {
		return nil, err
	}
	if pr.Kind != "PrometheusRule" || len(pr.Spec.Groups) == 0 {
		return nil, fmt.Errorf("not a PrometheusRule with groups: kind %q, %d groups", pr.Kind, len(pr.Spec.Groups))
	}
	return pr.Spec.Groups, nil
}

// ValidFor tells whether d is a duration Prometheus reads in a rule's `for`.
func ValidFor(d string) error {
	_, err := model.ParseDuration(d)
	return err
}

// DashboardQueries are the PromQL expressions of a Grafana dashboard's panels, rows' panels included,
// by panel title; the dashboard must be valid JSON.
func DashboardQueries(dashboard []byte) (map[string][]string, error) {
	type panel struct {
		Title   string                  `json:"title"`
		Targets []struct{ Expr string } `json:"targets"`
		Panels  []json.RawMessage       `json:"panels"`
	}
	var d struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, err
	}
	queries := map[string][]string{}
	var walk func([]json.RawMessage) error
	walk = func(raw []json.RawMessage) error {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				return err
			}
			for _, t := range p.Targets {
				queries[p.Title] = append(queries[p.Title], t.Expr)
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	return queries, walk(d.Panels)
}

// RuleGroups are the groups of RulesFile.
func RuleGroups() ([]Group, error) {
	rulesFile, err := Read(RulesFile)
	if err != nil {
		return nil, err
	}
	return Groups(rulesFile)
}

// AgentMetric tells the sidecar agent's metrics, which its own registry has, from the manager's.
func AgentMetric(name string) bool { return strings.HasPrefix(name, "sidecar_agent_") }

// Expressions are the PromQL expressions of Dir's files, by where they are: "alert NAME" for the
// rules, "panel TITLE #N" for the dashboard's queries.
func Expressions() (map[string]string, error) {
	groups, err := RuleGroups()
	if err != nil {
		return nil, err
	}
	dashboard, err := Read(DashboardFile)
	if err != nil {
		return nil, err
	}
	queries, err := DashboardQueries(dashboard)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DashboardFile, err)
	}
	exprs := map[string]string{}
	for _, g := range groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	for title, qs := range queries {
		for i, q := range qs {
			exprs[fmt.Sprintf("panel %s #%d", title, i+1)] = q
		}
	}
	return exprs, nil
}

// A Use is a metric an expression selects, with the labels it matches on.
type Use struct {
	Metric string
	// Matched are the label names of its matchers.
	Matched []string
}

// An Aggregation is an aggregation of an expression, with the labels it keeps or drops and the
// metrics under it.
type Aggregation struct {
	Grouping []string
	Metrics  []string
}

// Parse parses expr with Prometheus' own parser and returns the metrics it selects and the
// aggregations that group them.
func Parse(expr string) ([]Use, []Aggregation, error) {
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, nil, err
	}
	uses := selected(node)
	if len(uses) == 0 {
		return nil, nil, fmt.Errorf("%s selects no metric", expr)
	}
	var aggs []Aggregation
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if a, ok := n.(*parser.AggregateExpr); ok && len(a.Grouping) > 0 {
			agg := Aggregation{Grouping: a.Grouping}
			for _, u := range selected(a.Expr) {
				agg.Metrics = append(agg.Metrics, u.Metric)
			}
			aggs = append(aggs, agg)
		}
		return nil
	})
	return uses, aggs, nil
}

func selected(node parser.Node) []Use {
	var uses []Use
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			u := Use{Metric: vs.Name}
			for _, m := range vs.LabelMatchers {
				if m.Name != model.MetricNameLabel {
					u.Matched = append(u.Matched, m.Name)
				}
			}
			uses = append(uses, u)
		}
		return nil
	})
	return uses
}

// TargetLabels are the labels Prometheus gives every series of a scraped target (its job and
// address), the ones prometheus-operator's ServiceMonitors and PodMonitors add, and cluster, which
// tells clusters apart where one Prometheus holds several (an external label, or Thanos' and Mimir's
// convention): rules and panels may match and group on them whatever the metric.
var TargetLabels = []string{"job", "instance", "namespace", "pod", "container", "service", "endpoint", "cluster"}

// histogramSeries are the suffixes of the series a histogram is exposed as.
var histogramSeries = []string{"_bucket", "_count", "_sum"}

// Labels returns the label names of the series metric, a series of one of registered (by name,
// with their label names) or a histogram's, and whether it is one. A registry's descriptions carry
// no type: a histogram's series are accepted of any metric but a counter (named …_total).
func Labels(metric string, registered map[string][]string) ([]string, bool) {
	if l, ok := registered[metric]; ok {
		return l, true
	}
	for _, s := range histogramSeries {
		if base, ok := strings.CutSuffix(metric, s); ok && !strings.HasSuffix(base, "_total") {
			if l, ok := registered[base]; ok {
				if s == "_bucket" {
					l = append(slices.Clone(l), "le")
				}
				return l, true
			}
		}
	}
	return nil, false
}

// Check returns what is wrong with the uses and aggregations of one expression against registered:
// a metric no binary registers, a label matched or grouped by that none of its metrics has. It checks
// only the metrics owned says are registered's, and is silent about the others.
func Check(uses []Use, aggs []Aggregation, registered map[string][]string, owned func(metric string) bool) []string {
	var problems []string
	for _, u := range uses {
		if !owned(u.Metric) {
			continue
		}
		labels, ok := Labels(u.Metric, registered)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s is not registered", u.Metric))
			continue
		}
		for _, l := range u.Matched {
			if !slices.Contains(labels, l) && !slices.Contains(TargetLabels, l) {
				problems = append(problems, fmt.Sprintf("%s has no label %s", u.Metric, l))
			}
		}
	}
	for _, a := range aggs {
		if !slices.ContainsFunc(a.Metrics, owned) {
			continue
		}
		var labels []string
		for _, m := range a.Metrics {
			l, _ := Labels(m, registered)
			labels = append(labels, l...)
		}
		for _, l := range a.Grouping {
			if !slices.Contains(labels, l) && !slices.Contains(TargetLabels, l) {
				problems = append(problems, fmt.Sprintf("grouping by %s: none of %v has it", l, a.Metrics))
			}
		}
	}
	return problems
}
