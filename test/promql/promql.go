// Package promql holds the PromQL of the alerting rules and of the dashboard (config/components/
// monitoring) to the metrics docs/operations.md and docs/agent.md list, with their labels, by parsing
// it with Prometheus' own parser. The docs' tables are the code's: manager's and agent's doc tests
// hold them to the registries the binaries serve. It is a module of its own so that Prometheus, whose
// module is large, stays out of the product's go.mod; promtool checks and evaluates the rules
// themselves (test/manifests).
package promql

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

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
