package manifests

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/internal/testing/promrules"
	"github.com/sidecarops/sidecarops/internal/testing/render"
)

// The manager's monitoring objects, as config/components/monitoring and the chart name them.
var managerMonitoring = []string{
	"Service/" + namespace + "/sidecarops-metrics",
	"ServiceMonitor/" + namespace + "/sidecarops-manager",
	"PrometheusRule/" + namespace + "/sidecarops",
	"ConfigMap/" + namespace + "/sidecarops-dashboard",
}

var allMonitoring = append([]string{
	"ClusterRoleBinding/sidecarops-metrics-reader",
	"ServiceAccount/" + namespace + "/sidecar-agent-scraper",
	"PodMonitor/" + namespace + "/sidecar-agent",
	"ClusterRole/sidecar-agent-metrics-reader",
}, managerMonitoring...)

// Monitoring is off by default: prometheus-operator's kinds would fail the install where it is not.
func TestChartMonitoringOffByDefault(t *testing.T) {
	objs := chart(t, nil)
	for _, k := range allMonitoring {
		assert.NotContains(t, objs, k)
	}
}

// On, the chart's monitoring objects are config/components/monitoring's, and its PrometheusRule
// holds the rules file's groups.
func TestChartMonitoringIsTheComponent(t *testing.T) {
	objs := chart(t, nil, "monitoring.serviceMonitor.enabled=true", "monitoring.prometheusRule.enabled=true",
		"monitoring.dashboard.enabled=true")
	fromChart := render.Objects{}
	for _, k := range managerMonitoring {
		require.Contains(t, objs, k)
		fromChart[k] = objs[k]
	}
	stripHelmLabels(t, fromChart)
	component := kustomize(t, "config/samples/monitoring")
	for _, k := range managerMonitoring {
		assert.Equal(t, component[k].Object, fromChart[k].Object, "%s differs between config/components/monitoring and the chart", k)
	}

	file, err := promrules.Read(promrules.RulesFile)
	require.NoError(t, err)
	want, err := promrules.Groups(file)
	require.NoError(t, err)
	rendered, err := yaml.Marshal(objs["PrometheusRule/"+namespace+"/sidecarops"].Object)
	require.NoError(t, err)
	got, err := promrules.Groups(rendered)
	require.NoError(t, err)
	assert.Equal(t, want, got, "the PrometheusRule's groups are the rules file's")

	cm := as[corev1.ConfigMap](t, objs["ConfigMap/"+namespace+"/sidecarops-dashboard"])
	assert.Equal(t, "1", cm.Labels["grafana_dashboard"])
	dashboard, err := promrules.Read(promrules.DashboardFile)
	require.NoError(t, err)
	assert.Equal(t, string(dashboard), cm.Data["sidecarops.json"], "the dashboard file, as it is")
	assert.True(t, json.Valid([]byte(cm.Data["sidecarops.json"])))
}

// Every monitoring value lands where prometheus-operator, Grafana and RBAC read it.
func TestChartMonitoringValues(t *testing.T) {
	objs := chart(t, []string{fullValues})
	for _, k := range allMonitoring {
		if k == "ConfigMap/"+namespace+"/sidecarops-dashboard" {
			k = "ConfigMap/grafana/sidecarops-dashboard"
		}
		assert.Contains(t, objs, k)
	}
	release := map[string]any{"release": "kube-prometheus-stack"}
	for _, k := range []string{"ServiceMonitor/" + namespace + "/sidecarops-manager", "PodMonitor/" + namespace + "/sidecar-agent", "PrometheusRule/" + namespace + "/sidecarops"} {
		assert.Subset(t, objs[k].GetLabels(), release, "%s: the labels Prometheus selects by", k)
	}

	// manager.metrics.insecure: plain HTTP, no token sent.
	endpoints, _, _ := unstructured.NestedSlice(objs["ServiceMonitor/"+namespace+"/sidecarops-manager"].Object, "spec", "endpoints")
	assert.Equal(t, []any{map[string]any{"port": "metrics", "path": "/metrics", "scheme": "http"}}, endpoints)
	svc := as[corev1.Service](t, objs["Service/"+namespace+"/sidecarops-metrics"])
	assert.Equal(t, int32(9443), svc.Spec.Ports[0].Port, "manager.metrics.port")

	crb := as[rbacv1.ClusterRoleBinding](t, objs["ClusterRoleBinding/sidecarops-metrics-reader"])
	assert.Equal(t, "sidecarops-metrics-reader", crb.RoleRef.Name)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"}}, crb.Subjects)

	pm := objs["PodMonitor/"+namespace+"/sidecar-agent"].Object
	assert.Equal(t, map[string]any{"matchNames": []any{"games"}}, pm["spec"].(map[string]any)["namespaceSelector"], "podMonitor.namespaces, not agent.rbac.namespaces")
	pmEndpoints, _, _ := unstructured.NestedSlice(pm, "spec", "podMetricsEndpoints")
	assert.Equal(t, []any{map[string]any{"port": "agent-http", "path": "/metrics", "authorization": map[string]any{
		"type": "Bearer", "credentials": map[string]any{"name": "agent-scrape-token", "key": "jwt"}}}}, pmEndpoints)
	rb := as[rbacv1.RoleBinding](t, objs["RoleBinding/games/sidecar-agent-scraper"])
	assert.Equal(t, "sidecar-agent-metrics-reader", rb.RoleRef.Name)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sidecar-agent-scraper", Namespace: namespace}}, rb.Subjects)
	assert.NotContains(t, objs, "RoleBinding/web/sidecar-agent-scraper", "only the PodMonitor's namespaces")

	cm := as[corev1.ConfigMap](t, objs["ConfigMap/grafana/sidecarops-dashboard"])
	assert.Equal(t, "platform", cm.Labels["team"])
	assert.Equal(t, "1", cm.Labels["grafana_dashboard"])
	assert.Equal(t, map[string]string{"grafana_folder": "sidecarops"}, cm.Annotations)
}

// The PodMonitor alone (agent.rbac off) renders the role its ServiceAccount is bound to, and the
// manager's own scrape over HTTPS sends Prometheus' token.
func TestChartMonitoringDefaults(t *testing.T) {
	objs := chart(t, nil, "monitoring.podMonitor.enabled=true", "monitoring.podMonitor.namespaces={games}",
		"monitoring.serviceMonitor.enabled=true")
	require.Contains(t, objs, "ClusterRole/sidecar-agent-metrics-reader")
	assert.Equal(t, kustomize(t, "config/agent")["ClusterRole/sidecar-agent-metrics-reader"].Object["rules"],
		objs["ClusterRole/sidecar-agent-metrics-reader"].Object["rules"], "config/agent's")
	selector, _, _ := unstructured.NestedMap(objs["PodMonitor/"+namespace+"/sidecar-agent"].Object, "spec", "selector")
	assert.Equal(t, map[string]any{"matchLabels": map[string]any{"sidecarops.io/sidecar-agent": "enabled"}}, selector,
		"the label examples/sidecar-agent injects by")
	endpoints, _, _ := unstructured.NestedSlice(objs["ServiceMonitor/"+namespace+"/sidecarops-manager"].Object, "spec", "endpoints")
	require.Len(t, endpoints, 1)
	assert.Equal(t, "https", endpoints[0].(map[string]any)["scheme"])
	assert.Equal(t, "/var/run/secrets/kubernetes.io/serviceaccount/token", endpoints[0].(map[string]any)["bearerTokenFile"])
	assert.NotContains(t, objs, "ClusterRoleBinding/sidecarops-metrics-reader", "no readers named, no binding")
	assert.Equal(t, map[string]any{"insecureSkipVerify": true}, endpoints[0].(map[string]any)["tlsConfig"],
		"the manager's own certificates: the metrics port's is self-signed")

	// cert-manager's certificate exists before the manager starts, and its metrics port serves it
	// (test/e2e.TestMetricsNeedAnAuthorizedCaller verifies it): Prometheus checks it before it
	// sends its token.
	objs = chart(t, nil, "monitoring.serviceMonitor.enabled=true", "certificates.provider=cert-manager")
	endpoints, _, _ = unstructured.NestedSlice(objs["ServiceMonitor/"+namespace+"/sidecarops-manager"].Object, "spec", "endpoints")
	require.Len(t, endpoints, 1)
	assert.Equal(t, map[string]any{
		"ca":         map[string]any{"secret": map[string]any{"name": "sidecarops-webhook-cert", "key": "ca.crt"}},
		"serverName": "sidecarops-webhook." + namespace + ".svc",
	}, endpoints[0].(map[string]any)["tlsConfig"])
	cert := objs["Certificate/"+namespace+"/sidecarops-webhook-cert"]
	require.NotNil(t, cert, "the Secret the ServiceMonitor reads is the Certificate's")
	assert.Equal(t, "sidecarops-webhook-cert", cert.Object["spec"].(map[string]any)["secretName"])
}

// Half-configured monitoring fails the install with what is missing, not objects that scrape nothing.
func TestChartMonitoringRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		says string
	}{
		{"a ServiceMonitor without metrics", []string{"monitoring.serviceMonitor.enabled=true", "manager.metrics.enabled=false"}, "need manager.metrics.enabled"},
		{"a PodMonitor without namespaces", []string{"monitoring.podMonitor.enabled=true"}, "needs the agent's namespaces"},
		{"a PodMonitor without a token", []string{"monitoring.podMonitor.enabled=true", "agent.rbac.namespaces={games}", "monitoring.podMonitor.tokenSecret.name="}, "refuses Prometheus' own token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render.Chart(t.TempDir(), chartDir, "sidecarops", namespace, nil, tc.sets...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

// monitoringValues turns the PrometheusRule on with labels for every rule, and errorRatio when
// not empty, as a values file (where errorRatio is a number, as an administrator writes it).
func monitoringValues(t *testing.T, errorRatio string) string {
	t.Helper()
	values := "monitoring:\n  prometheusRule:\n    enabled: true\n    ruleLabels: {team: platform, severity: page}\n"
	if errorRatio != "" {
		values += "    errorRatio: " + errorRatio + "\n"
	}
	f := filepath.Join(t.TempDir(), "monitoring-values.yaml")
	require.NoError(t, os.WriteFile(f, []byte(values), 0o600))
	return f
}

// renderedRules are the rule groups of the chart's PrometheusRule with the values files given.
func renderedRules(t *testing.T, values ...string) []promrules.Group {
	t.Helper()
	objs := chart(t, values)
	pr, ok := objs["PrometheusRule/"+namespace+"/sidecarops"]
	require.True(t, ok, "the PrometheusRule")
	rendered, err := yaml.Marshal(pr.Object)
	require.NoError(t, err)
	groups, err := promrules.Groups(rendered)
	require.NoError(t, err)
	return groups
}

// The chart's rules are the file's with monitoring.prometheusRule.ruleLabels on every rule (its
// own severity kept, for Alertmanager's routing by it) and the critical error ratio from
// monitoring.prometheusRule.errorRatio; nothing else changes.
func TestChartRuleLabelsAndErrorRatio(t *testing.T) {
	want, err := promrules.RuleGroups()
	require.NoError(t, err)
	for _, ratio := range []string{"", "0.2", "1"} {
		t.Run("errorRatio "+ratio, func(t *testing.T) {
			got := renderedRules(t, monitoringValues(t, ratio))
			require.Len(t, got, len(want))
			for i, g := range want {
				require.Len(t, got[i].Rules, len(g.Rules), g.Name)
				for j, r := range g.Rules {
					gr := got[i].Rules[j]
					wantLabels := maps.Clone(r.Labels)
					wantLabels["team"] = "platform"
					assert.Equal(t, wantLabels, gr.Labels, "%s: its own labels, and the values'", r.Alert)
					if r.Alert == "SidecaropsAdmissionsFailing" && ratio != "" {
						prefix, found := strings.CutSuffix(r.Expr, "> 0.05")
						require.True(t, found, "the rules file's ratio is the values' default: %s", r.Expr)
						assert.Equal(t, prefix+"> "+ratio, gr.Expr)
						continue
					}
					assert.Equal(t, r, promrules.Rule{Alert: gr.Alert, Expr: gr.Expr, For: gr.For, Labels: r.Labels, Annotations: gr.Annotations}, r.Alert)
				}
			}
		})
	}
}

// A floatSample is a sample of a series loaded for the rules' tests.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                    { return s.t }
func (floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                  { return s.f }
func (floatSample) H() *histogram.Histogram       { return nil }
func (floatSample) FH() *histogram.FloatHistogram { return nil }
func (floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample         { return s }

// loadSeries is a store of the series of block, each line a series in promqltest's notation
// (`metric{labels} 0+1x30 _x9 …`, as Prometheus' parser reads it), one sample a minute from time 0.
func loadSeries(t *testing.T, block string) storage.Queryable {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	var series []storage.Series
	for line := range strings.Lines(block) {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		lset, values, err := p.ParseSeriesDesc(line)
		require.NoError(t, err, line)
		var samples []chunks.Sample
		for i, v := range values {
			if !v.Omitted {
				samples = append(samples, floatSample{t: int64(i) * time.Minute.Milliseconds(), f: v.Value})
			}
		}
		series = append(series, storage.NewListSeries(lset, samples))
	}
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
			set := &seriesSet{}
			for _, s := range series {
				if !slices.ContainsFunc(matchers, func(m *labels.Matcher) bool { return !m.Matches(s.Labels().Get(m.Name)) }) {
					set.series = append(set.series, s)
				}
			}
			slices.SortFunc(set.series, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
			return set
		},
	}}
}

// A seriesSet is the series a selector of loadSeries' store matches, sorted by labels.
type seriesSet struct {
	series []storage.Series
	next   int
}

func (s *seriesSet) Next() bool                      { s.next++; return s.next <= len(s.series) }
func (s *seriesSet) At() storage.Series              { return s.series[s.next-1] }
func (*seriesSet) Err() error                        { return nil }
func (*seriesSet) Warnings() annotations.Annotations { return nil }

// alertsFiring evaluates groups every minute from minute from to minute to over the series of
// block (loadSeries) with Prometheus' query engine, as its rule manager does: an alert is each
// series an expression returns, with the rule's labels; it fires once returned at every evaluation
// for the rule's `for`. It returns the alerts that fired at any evaluation, by name, with their
// labels, and checks that every annotation expands with Prometheus' alert templates.
func alertsFiring(t *testing.T, groups []promrules.Group, block string, from, to int) map[string][]labels.Labels {
	t.Helper()
	store := loadSeries(t, block)
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: time.Minute, Parser: parser.NewParser(parser.Options{})})
	t.Cleanup(func() { assert.NoError(t, engine.Close()) })
	query := func(ctx context.Context, q string, ts time.Time) (promql.Vector, error) {
		qry, err := engine.NewInstantQuery(ctx, store, nil, q, ts)
		if err != nil {
			return nil, err
		}
		defer qry.Close()
		return qry.Exec(ctx).Vector()
	}
	fired := map[string][]labels.Labels{}
	activeSince := map[string]time.Time{}
	for _, g := range groups {
		for _, r := range g.Rules {
			hold, err := model.ParseDuration(r.For)
			require.NoError(t, err, r.Alert)
			for m := from; m <= to; m++ {
				ts := time.Unix(0, 0).UTC().Add(time.Duration(m) * time.Minute)
				vec, err := query(t.Context(), r.Expr, ts)
				require.NoError(t, err, "%s at %s", r.Alert, ts)
				returned := map[string]bool{}
				for _, smpl := range vec {
					b := labels.NewBuilder(smpl.Metric).Del(model.MetricNameLabel).Set(labels.AlertName, r.Alert)
					for k, v := range r.Labels {
						b.Set(k, v)
					}
					alert := b.Labels()
					key := alert.String()
					returned[key] = true
					since, active := activeSince[key]
					if !active {
						since, activeSince[key] = ts, ts
					}
					if ts.Sub(since) >= time.Duration(hold) && !slices.ContainsFunc(fired[r.Alert], func(l labels.Labels) bool { return labels.Equal(l, alert) }) {
						fired[r.Alert] = append(fired[r.Alert], alert)
					}
					data := template.AlertTemplateData(smpl.Metric.Map(), nil, "", smpl)
					for name, text := range r.Annotations {
						_, err := template.NewTemplateExpander(t.Context(),
							"{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"+text,
							name, data, model.Time(ts.UnixMilli()), query, nil, nil).Expand()
						assert.NoError(t, err, "%s: annotation %s", r.Alert, name)
					}
				}
				for key := range activeSince {
					if strings.Contains(key, `alertname="`+r.Alert+`"`) && !returned[key] {
						delete(activeSince, key)
					}
				}
			}
		}
	}
	return fired
}

// The rules fire on what they say, evaluated with Prometheus' rule engine on series made for each
// case, as the chart renders them: one error among many admissions is a warning, never the
// critical alert; an error ratio above the threshold (the values' or the default) is critical; the
// API server failing open on the pod webhook, from the first pod, is its alert.
func TestAlertsFire(t *testing.T) {
	// The rules are evaluated from minute 15 to 40, with the history of a Prometheus that has
	// scraped for longer than any rule looks back (increase over 15m).
	const from, to = 15, 40
	// Two replicas' pod decisions, patched and error, as counters from 0 (the manager makes every
	// series at start), a sample a minute; each replica's errors in promqltest's notation.
	decisions := func(patchedPerMinute string, errors ...string) string {
		var s string
		for i, pod := range []string{"sidecarops-manager-a", "sidecarops-manager-b"} {
			l := `namespace="sidecarops-system", pod="` + pod + `"`
			s += `  sidecarops_webhook_pod_decisions_total{` + l + `, result="patched"} 0+` + patchedPerMinute + "x40\n"
			s += `  sidecarops_webhook_pod_decisions_total{` + l + `, result="error"} ` + errors[i] + "\n"
		}
		return s
	}
	const failOpen = `  apiserver_admission_webhook_fail_open_count{instance="10.0.0.1:6443", name="%s", type="admit"} %s` + "\n"
	for _, tc := range []struct {
		name, errorRatio, series string
		fire                     []string
	}{
		{"no error", "", decisions("100", "0x40", "0x40"), nil},
		// One error among thousands of admissions, then none: pods are still admitted.
		{"one error among many", "", decisions("100", "0x19 1x21", "0x40"), []string{"SidecaropsAdmissionErrors"}},
		{"errors below the ratio", "", decisions("98", "0+2x40", "0+2x40"), []string{"SidecaropsAdmissionErrors"}},
		{"errors above the ratio", "", decisions("90", "0+10x40", "0+10x40"), []string{"SidecaropsAdmissionErrors", "SidecaropsAdmissionsFailing"}},
		// A ratio, not a rate: many errors a second among very many admissions are below it, a few
		// among fewer above it.
		{"many errors below the ratio", "", decisions("10000", "0+100x40", "0+100x40"), []string{"SidecaropsAdmissionErrors"}},
		{"few errors above the ratio", "", decisions("1", "0+1x40", "0+1x40"), []string{"SidecaropsAdmissionErrors", "SidecaropsAdmissionsFailing"}},
		// One replica failing every admission is half of them.
		{"one replica failing", "", decisions("100", "0x19 0+100x21", "0x40"), []string{"SidecaropsAdmissionErrors", "SidecaropsAdmissionsFailing"}},
		{"errors below the values' ratio", "0.2", decisions("90", "0+10x40", "0+10x40"), []string{"SidecaropsAdmissionErrors"}},
		{"errors above the values' ratio", "0.2", decisions("70", "0+30x40", "0+30x40"), []string{"SidecaropsAdmissionErrors", "SidecaropsAdmissionsFailing"}},
		// The API server makes the series at its first fail-open, with that pod in it.
		{"first pod failed open", "", fmt.Sprintf(failOpen, "mpod.sidecarops.io", "_x19 1x21"), []string{"SidecaropsPodWebhookFailedOpen"}},
		{"more pods failed open", "", fmt.Sprintf(failOpen, "mpod.sidecarops.io", "3x19 4x21"), []string{"SidecaropsPodWebhookFailedOpen"}},
		{"pods failed open long ago", "", fmt.Sprintf(failOpen, "mpod.sidecarops.io", "3x40"), nil},
		{"another webhook failed open", "", fmt.Sprintf(failOpen, "mpod.kruise.io", "_x19 1+1x21"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fired := alertsFiring(t, renderedRules(t, monitoringValues(t, tc.errorRatio)), tc.series, from, to)
			assert.ElementsMatch(t, tc.fire, slices.Collect(maps.Keys(fired)))
			for name, alerts := range fired {
				for _, l := range alerts {
					assert.Equal(t, "platform", l.Get("team"), "%s: the values' rule labels", name)
				}
			}
			if alerts := fired["SidecaropsAdmissionErrors"]; tc.name == "one error among many" {
				require.Len(t, alerts, 1, "the replica that answered the error")
				assert.Equal(t, "sidecarops-manager-a", alerts[0].Get("pod"))
			}
			if alerts := fired["SidecaropsPodWebhookFailedOpen"]; len(alerts) > 0 {
				assert.Equal(t, "mpod.sidecarops.io", alerts[0].Get("name"))
			}
		})
	}
}

// headingAnchors are the anchors GitHub gives the headings of a markdown document: the heading's
// text in lower case, without punctuation, spaces made hyphens, a repeated one numbered.
func headingAnchors(markdown []byte) map[string]bool {
	anchors := map[string]bool{}
	fenced := false
	for line := range strings.Lines(string(markdown)) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		text := strings.TrimLeft(line, "#")
		if fenced || len(text) == len(line) || !strings.HasPrefix(text, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for i := 1; anchors[a]; i++ {
			a = fmt.Sprintf("%s-%d", b.String(), i)
		}
		anchors[a] = true
	}
	return anchors
}

// Every alert's runbook_url is a section of docs/operations.md of its own, named after it.
func TestRunbookAnchorsExist(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	anchors := headingAnchors(doc)
	groups, err := promrules.RuleGroups()
	require.NoError(t, err)
	for _, g := range groups {
		for _, r := range g.Rules {
			anchor, found := strings.CutPrefix(r.Annotations["runbook_url"], "https://github.com/sidecarops/sidecarops/blob/main/docs/operations.md#")
			if assert.True(t, found, "%s: %s", r.Alert, r.Annotations["runbook_url"]) {
				assert.Equal(t, strings.ToLower(r.Alert), anchor, "%s: its own section", r.Alert)
				assert.True(t, anchors[anchor], "%s: docs/operations.md has no heading for #%s", r.Alert, anchor)
			}
		}
	}
}

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
