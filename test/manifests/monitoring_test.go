package manifests

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

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

// promtool runs the promtool `make tools` built (SIDECAROPS_PROMTOOL) with args; the test fails with
// what it printed if it fails.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin := os.Getenv("SIDECAROPS_PROMTOOL")
	if bin == "" {
		t.Fatal("SIDECAROPS_PROMTOOL is not set: run the tests through `make test` (it builds the pinned promtool with `make tools`)")
	}
	out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
}

// writeRules writes groups into dir as a Prometheus rules file (a PrometheusRule's spec) and returns
// its path.
func writeRules(t *testing.T, dir string, groups []promrules.Group) string {
	t.Helper()
	b, err := yaml.Marshal(map[string]any{"groups": groups})
	require.NoError(t, err)
	f := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(f, b, 0o600))
	return f
}

// The rules file, and the chart's rules with a ratio of the values', are rules Prometheus loads:
// every expression parses, every `for` is a duration, every annotation is a template of Prometheus'
// functions, and no rule is there twice (promtool check rules, its lint fatal).
func TestRulesCheck(t *testing.T) {
	file, err := promrules.RuleGroups()
	require.NoError(t, err)
	for name, groups := range map[string][]promrules.Group{
		"the rules file": file,
		"errorRatio 0.2": renderedRules(t, monitoringValues(t, "0.2")),
	} {
		t.Run(name, func(t *testing.T) {
			promtool(t, "check", "rules", "--lint-fatal", writeRules(t, t.TempDir(), groups))
		})
	}
}

// A unit test file of `promtool test rules`, the fields used here.
type (
	ruleTests struct {
		RuleFiles          []string   `json:"rule_files"`
		EvaluationInterval string     `json:"evaluation_interval"`
		Tests              []ruleTest `json:"tests"`
	}
	ruleTest struct {
		Interval       string        `json:"interval"`
		InputSeries    []inputSeries `json:"input_series"`
		PromQLExprTest []exprTest    `json:"promql_expr_test"`
	}
	inputSeries struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	exprTest struct {
		Expr       string   `json:"expr"`
		EvalTime   string   `json:"eval_time"`
		ExpSamples []sample `json:"exp_samples"`
	}
	sample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
)

// The rules fire on what they say, evaluated by promtool (Prometheus' rule manager and query engine)
// on series made for each case, as the chart renders them: one error among many admissions is a
// warning, never the critical alert; an error ratio above the threshold (the values' or the default)
// is critical; the API server failing open on the pod webhook, from the first pod, is its alert.
func TestAlertsFire(t *testing.T) {
	// The alerts that fired from minute 15 to 40, with the history of a Prometheus that has scraped
	// for longer than any rule looks back (increase over 15m). promtool evaluates the rules every
	// minute from 0 and writes each alert's state to ALERTS, which a query at minute 40 reads back over
	// (14m, 40m]: range selectors are open on the left.
	const from, to = 15, 40
	firedSince := func(selector string) string {
		return fmt.Sprintf(`max_over_time(ALERTS{alertstate="firing"%s}[%dm])`, selector, to-from+1)
	}
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
		// errorsOf, where set, is the one replica a SidecaropsAdmissionErrors alert names.
		errorsOf string
	}{
		{name: "no error", series: decisions("100", "0x40", "0x40")},
		// One error among thousands of admissions, then none: pods are still admitted.
		{name: "one error among many", series: decisions("100", "0x19 1x21", "0x40"), fire: []string{"SidecaropsAdmissionErrors"}, errorsOf: "sidecarops-manager-a"},
		{name: "errors below the ratio", series: decisions("98", "0+2x40", "0+2x40"), fire: []string{"SidecaropsAdmissionErrors"}},
		{name: "errors above the ratio", series: decisions("90", "0+10x40", "0+10x40"), fire: []string{"SidecaropsAdmissionErrors", "SidecaropsAdmissionsFailing"}},
		// A ratio, not a rate: many errors a second among very many admissions are below it, a few
		// among fewer above it.
		{name: "many errors below the ratio", series: decisions("10000", "0+100x40", "0+100x40"), fire: []string{"SidecaropsAdmissionErrors"}},
		{name: "few errors above the ratio", series: decisions("1", "0+1x40", "0+1x40"), fire: []string{"SidecaropsAdmissionErrors", "SidecaropsAdmissionsFailing"}},
		// One replica failing every admission is half of them.
		{name: "one replica failing", series: decisions("100", "0x19 0+100x21", "0x40"), fire: []string{"SidecaropsAdmissionErrors", "SidecaropsAdmissionsFailing"}},
		{name: "errors below the values' ratio", errorRatio: "0.2", series: decisions("90", "0+10x40", "0+10x40"), fire: []string{"SidecaropsAdmissionErrors"}},
		{name: "errors above the values' ratio", errorRatio: "0.2", series: decisions("70", "0+30x40", "0+30x40"), fire: []string{"SidecaropsAdmissionErrors", "SidecaropsAdmissionsFailing"}},
		// The API server makes the series at its first fail-open, with that pod in it.
		{name: "first pod failed open", series: fmt.Sprintf(failOpen, "mpod.sidecarops.io", "_x19 1x21"), fire: []string{"SidecaropsPodWebhookFailedOpen"}},
		{name: "more pods failed open", series: fmt.Sprintf(failOpen, "mpod.sidecarops.io", "3x19 4x21"), fire: []string{"SidecaropsPodWebhookFailedOpen"}},
		{name: "pods failed open long ago", series: fmt.Sprintf(failOpen, "mpod.sidecarops.io", "3x40")},
		{name: "another webhook failed open", series: fmt.Sprintf(failOpen, "mpod.kruise.io", "_x19 1+1x21")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var test ruleTest
			test.Interval = "1m"
			for line := range strings.Lines(tc.series) {
				i := strings.LastIndex(line, "} ")
				require.Positive(t, i, "series and values: %s", line)
				test.InputSeries = append(test.InputSeries, inputSeries{strings.TrimSpace(line[:i+1]), strings.TrimSpace(line[i+2:])})
			}
			at := fmt.Sprintf("%dm", to)
			// Every alert that fired, by name, has the values' rule labels: one without them would be
			// a sample of its own, without team.
			names := exprTest{Expr: "group by (alertname, team) (" + firedSince("") + ")", EvalTime: at, ExpSamples: []sample{}}
			for _, name := range tc.fire {
				names.ExpSamples = append(names.ExpSamples, sample{Labels: `{alertname="` + name + `", team="platform"}`, Value: 1})
			}
			test.PromQLExprTest = append(test.PromQLExprTest, names)
			if tc.errorsOf != "" {
				test.PromQLExprTest = append(test.PromQLExprTest, exprTest{
					Expr: "count by (pod) (" + firedSince(`, alertname="SidecaropsAdmissionErrors"`) + ")", EvalTime: at,
					ExpSamples: []sample{{Labels: `{pod="` + tc.errorsOf + `"}`, Value: 1}},
				})
			}
			if slices.Contains(tc.fire, "SidecaropsPodWebhookFailedOpen") {
				test.PromQLExprTest = append(test.PromQLExprTest, exprTest{
					Expr: "group by (name) (" + firedSince(`, alertname="SidecaropsPodWebhookFailedOpen"`) + ")", EvalTime: at,
					ExpSamples: []sample{{Labels: `{name="mpod.sidecarops.io"}`, Value: 1}},
				})
			}

			dir := t.TempDir()
			rules := writeRules(t, dir, renderedRules(t, monitoringValues(t, tc.errorRatio)))
			b, err := yaml.Marshal(ruleTests{RuleFiles: []string{rules}, EvaluationInterval: "1m", Tests: []ruleTest{test}})
			require.NoError(t, err)
			tests := filepath.Join(dir, "tests.yaml")
			require.NoError(t, os.WriteFile(tests, b, 0o600))
			promtool(t, "test", "rules", tests)
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
