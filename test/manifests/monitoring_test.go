package manifests

import (
	"encoding/json"
	"testing"

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
