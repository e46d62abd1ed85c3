// Package promrules reads the monitoring files of config/components/monitoring — the alerting rules
// and the Grafana dashboard — so that tests can hold them to the chart and to docs/operations.md, and
// (test/promql, with Prometheus' parser) hold their PromQL to the metrics the binaries register.
package promrules

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prometheus/common/model"
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
