package agent

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sidecarops/sidecarops/agent/agenttest"
)

// A metrics scraper with config/agent's ClusterRole sidecar-agent-metrics-reader, and a token for the
// agent's audience, reads /metrics and /status and nothing of the plugins; its token for the API
// server, what a stock Prometheus would send, is refused (docs/agent.md, "Scraping the agent").
func TestMetricsScraper(t *testing.T) {
	ns := namespace(t)
	sa := agentIdentity(t, ns)
	pod(t, ns, "game-0", nil)
	files := httptest.NewServer(http.NotFoundHandler())
	defer files.Close()
	app := agenttest.StartSignalRecorder(t)
	operator := caller(t, ns, "game-operator", true)
	scraper := caller(t, ns, "prometheus", false)
	create(t, ns, schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "prometheus-sidecar-agent"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sidecar-agent-metrics-reader"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus", "namespace": ns}},
	})
	api := startAgent(t, sa, ns, "game-0", hotUpdateConfig(app.Name, files.URL)(t.TempDir()), operator)
	waitRunning(t, api)

	for _, tc := range []struct {
		name, method, path, token string
		code                      int
	}{
		{"metrics", "GET", "/metrics", scraper, 200},
		{"status, authorised alike", "GET", "/status", scraper, 200},
		{"a plugin's result", "GET", "/plugins/hot_update/result", scraper, 403},
		{"a plugin's update", "POST", "/plugins/hot_update/update", scraper, 403},
		{"its token for the API server", "GET", "/metrics", token(t, ns, "prometheus", ""), 401},
	} {
		code, out := api.call(t, tc.method, tc.path, tc.token, "{}")
		assert.Equal(t, tc.code, code, "%s: %s", tc.name, out)
	}
}
