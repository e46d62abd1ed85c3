package agent

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarops/sidecarops/agent/agenttest"
	"github.com/sidecarops/sidecarops/agent/plugins/hotupdate"
)

// The agent's identity can do what the agent does and nothing more.
func TestLeastPrivilege(t *testing.T) {
	ns := namespace(t)
	sa := dynamicClient(t, agentIdentity(t, ns))
	pod(t, ns, "game-0", nil)
	ctx := context.Background()
	// Reviews of the API's callers: a token's identity, and access in its own namespace.
	review := func(gvr schema.GroupVersionResource, ns string, obj map[string]any) error {
		ri := sa.Resource(gvr)
		if ns != "" {
			_, err := ri.Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
			return err
		}
		_, err := ri.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		return err
	}
	tokenReviews := schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews"}
	localReviews := schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "localsubjectaccessreviews"}
	clusterReviews := schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"}
	access := func(kind, ns string) map[string]any {
		return map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": kind, "metadata": map[string]any{"namespace": ns},
			"spec": map[string]any{"user": "x", "resourceAttributes": map[string]any{"namespace": ns, "verb": "update",
				"group": "sidecarops.io", "resource": "sidecaragents", "name": "game-0"}}}
	}
	require.NoError(t, review(tokenReviews, "", map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
		"spec": map[string]any{"token": "x"}}))
	require.NoError(t, review(localReviews, ns, access("LocalSubjectAccessReview", ns)))
	_, err := sa.Resource(pods).Namespace(ns).Get(ctx, "game-0", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = sa.Resource(pods).Namespace(ns).Patch(ctx, "game-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	forbidden := []struct {
		what string
		err  error
	}{
		{"list pods", func() error { _, err := sa.Resource(pods).Namespace(ns).List(ctx, listOne); return err }()},
		{"delete pods", sa.Resource(pods).Namespace(ns).Delete(ctx, "game-0", metav1.DeleteOptions{})},
		{"pods in another namespace", func() error {
			_, err := sa.Resource(pods).Namespace("default").Get(ctx, "x", metav1.GetOptions{})
			return err
		}()},
		{"other ConfigMaps", func() error {
			_, err := sa.Resource(configMaps).Namespace(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err
		}()},
		{"secrets", func() error {
			_, err := sa.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(ns).List(ctx, listOne)
			return err
		}()},
		{"list GameServers", func() error { _, err := sa.Resource(gameServers).Namespace(ns).List(ctx, listOne); return err }()},
		{"reviews of access in another namespace", review(localReviews, "default", access("LocalSubjectAccessReview", "default"))},
		{"reviews of access cluster-wide", review(clusterReviews, "", access("SubjectAccessReview", ""))},
	}
	for _, f := range forbidden {
		assert.True(t, apierrors.IsForbidden(f.err), "%s: want Forbidden, got %v", f.what, f.err)
	}
}

// game is a game server's state endpoint whose state the test sets; down makes it answer 503.
type game struct {
	mu    sync.Mutex
	state string
}

func (g *game) set(s string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.state = s
}

func (g *game) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == "down" {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, `{"state": %q}`, g.state)
}

func TestProbeResults(t *testing.T) {
	ns := namespace(t)
	sa := agentIdentity(t, ns)
	operator := caller(t, ns, "game-operator", true)
	pod(t, ns, "game-0", map[string]any{"app": "game"})
	create(t, ns, gameServers, map[string]any{"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServer",
		"metadata": map[string]any{"name": "game-0"}, "spec": map[string]any{"opsState": "None"}})
	g := &game{state: "idle"}
	srv := httptest.NewServer(g)
	defer srv.Close()
	api := startAgent(t, sa, ns, "game-0", fmt.Sprintf(`
plugins:
  - name: http_probe
    config:
      endpoints:
        - url: %[1]s/state
          periodSeconds: 1
          timeout: 5
          stateJSONPath: /state
          storageConfig:
            type: InKube
            inKube:
              annotationKey: game.example.com/state
              conditionType: game.example.com/Probed
              markerPolicies:
                - state: idle
                  labels: {game.example.com/idle: "true"}
                  annotations: {controller.kubernetes.io/pod-deletion-cost: "-10"}
                - state: allocated
                  labels: {game.example.com/idle: "false"}
                  annotations: {controller.kubernetes.io/pod-deletion-cost: "10"}
        - url: %[1]s/state
          periodSeconds: 1
          stateJSONPath: /state
          storageConfig:
            type: InKube
            inKube:
              target:
                group: game.kruise.io
                version: v1alpha1
                resource: gameservers
                name: ${SELF:POD_NAME}
                namespace: ${SELF:POD_NAMESPACE}
              jsonPath: /spec/opsState
`, srv.URL), operator)

	type seen struct {
		annotation, cost, idle, opsState, condStatus, condReason string
	}
	observe := func() seen {
		p := get(t, ns, pods, "game-0")
		gs := get(t, ns, gameServers, "game-0")
		s := seen{annotation: p.GetAnnotations()["game.example.com/state"], cost: p.GetAnnotations()["controller.kubernetes.io/pod-deletion-cost"],
			idle: p.GetLabels()["game.example.com/idle"]}
		s.opsState, _, _ = unstructured.NestedString(gs.Object, "spec", "opsState")
		conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "game.example.com/Probed" {
				s.condStatus, s.condReason = m["status"].(string), m["reason"].(string)
			}
		}
		return s
	}
	expect := func(want seen) {
		t.Helper()
		var last seen
		require.Eventually(t, func() bool { last = observe(); return last == want }, wait, tick, "want %+v, last seen %+v", want, last)
	}
	expect(seen{"idle", "-10", "true", "idle", "True", "idle"})

	// Once stored, a repeated state writes nothing: the pod's resourceVersion stays while probes go on.
	rv := get(t, ns, pods, "game-0").GetResourceVersion()
	probes := func() int {
		var st struct {
			Plugins []struct {
				Details []struct{ Probes int } `json:"details"`
			} `json:"plugins"`
		}
		require.NoError(t, json.Unmarshal([]byte(api.get(t, "/status")), &st))
		return st.Plugins[0].Details[0].Probes
	}
	n := probes()
	require.Eventually(t, func() bool { return probes() >= n+2 }, wait, tick)
	assert.Equal(t, rv, get(t, ns, pods, "game-0").GetResourceVersion())
	assert.Contains(t, api.get(t, "/metrics"), `sidecar_agent_store_total{plugin="http_probe",result="unchanged"}`)

	g.set("allocated")
	expect(seen{"allocated", "10", "false", "allocated", "True", "allocated"})
	g.set("down")
	// Failed has no marker policy: the markers of the last known state stay.
	expect(seen{"Failed", "10", "false", "Failed", "False", "Failed"})
	// The labels the agent does not manage are untouched.
	assert.Equal(t, "game", get(t, ns, pods, "game-0").GetLabels()["app"])
}

func TestHotUpdate(t *testing.T) {
	ns := namespace(t)
	sa := agentIdentity(t, ns)
	rs := map[string]any{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "game-7d9f8", "uid": "7a1f0d2e-0000-4000-8000-000000000001", "controller": true}
	labels := map[string]any{"app": "game", "pod-template-hash": "7d9f8"}
	pod(t, ns, "game-7d9f8-a", labels, rs)
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/game.cfg":
			_, _ = w.Write([]byte("max_players=32\n"))
		case "/v2/game.cfg":
			_, _ = w.Write([]byte("max_players=64\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer files.Close()
	app := agenttest.StartSignalRecorder(t)
	operator := caller(t, ns, "game-operator", true)
	config := hotUpdateConfig(app.Name, files.URL)
	dirA := t.TempDir()
	apiA := startAgent(t, sa, ns, "game-7d9f8-a", config(dirA), operator)
	waitRunning(t, apiA)

	update := func(api agentAPI, body string) (int, hotupdate.Result) {
		code, out := api.call(t, http.MethodPost, "/plugins/hot_update/update", api.token, body)
		var res hotupdate.Result
		require.NoError(t, json.Unmarshal([]byte(out), &res), out)
		return code, res
	}
	annotation := func(podName string) hotupdate.Result {
		var res hotupdate.Result
		v := get(t, ns, pods, podName).GetAnnotations()["game.example.com/hot-update"]
		require.NoError(t, json.Unmarshal([]byte(v), &res), "annotation %q", v)
		return res
	}
	latest := func() map[string]string {
		cm := get(t, ns, configMaps, "sidecar-agent-hot-update")
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		return data
	}

	for i, v := range []string{"v1", "v2"} {
		code, res := update(apiA, fmt.Sprintf(`{"url": "%s/%s/game.cfg", "version": "%s"}`, files.URL, v, v))
		require.Equal(t, 200, code, res.Message)
		assert.True(t, res.Success)
		assert.Equal(t, "system:serviceaccount:"+ns+":game-operator", res.RequestedBy)
		assert.Equal(t, filepath.Join(dirA, "game.cfg"), res.File)
		assert.Equal(t, res, annotation("game-7d9f8-a"))
		require.Eventually(t, func() bool { return len(app.Signals(t)) == i+1 }, wait, tick)
		assert.Equal(t, "SIGUSR1", app.Signals(t)[i])
	}
	content, err := os.ReadFile(filepath.Join(dirA, "game.cfg"))
	require.NoError(t, err)
	assert.Equal(t, "max_players=64\n", string(content))
	assert.JSONEq(t, fmt.Sprintf(`{"url": "%s/v2/game.cfg", "version": "v2", "sha256": %q, "fileName": "game.cfg", "requestedBy": "system:serviceaccount:%s:game-operator"}`,
		files.URL, annotation("game-7d9f8-a").SHA256, ns), latest()["Deployment.game"])

	// A failed download keeps the file, reports the failure and leaves the workload's latest.
	code, res := update(apiA, fmt.Sprintf(`{"url": "%s/v3/game.cfg", "version": "v3"}`, files.URL))
	assert.Equal(t, http.StatusBadGateway, code)
	assert.False(t, res.Success)
	assert.Contains(t, res.Message, "status 404")
	assert.Equal(t, res, annotation("game-7d9f8-a"))
	content, err = os.ReadFile(filepath.Join(dirA, "game.cfg"))
	require.NoError(t, err)
	assert.Equal(t, "max_players=64\n", string(content))
	assert.Len(t, app.Signals(t), 2)
	assert.Contains(t, latest()["Deployment.game"], `"version":"v2"`)

	// A pod scaled out later starts with the workload's latest file, before any request.
	pod(t, ns, "game-7d9f8-b", labels, rs)
	dirB := t.TempDir()
	startAgent(t, sa, ns, "game-7d9f8-b", config(dirB), operator)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dirB, "game.cfg"))
		return err == nil && string(b) == "max_players=64\n"
	}, wait, tick)
	require.Eventually(t, func() bool {
		v := get(t, ns, pods, "game-7d9f8-b").GetAnnotations()["game.example.com/hot-update"]
		return strings.Contains(v, `"version":"v2"`) && strings.Contains(v, `"success":true`)
	}, wait, tick)
	assert.Equal(t, "restored the workload's latest version", annotation("game-7d9f8-b").Message)
	assert.Equal(t, "system:serviceaccount:"+ns+":game-operator", annotation("game-7d9f8-b").RequestedBy)

	// A record no authenticated request wrote (an older agent's, or one made by whoever may write
	// the ConfigMap) is not restored: the pod starts without it, and the refusal is counted.
	_, err = admin.Resource(configMaps).Namespace(ns).Patch(context.Background(), "sidecar-agent-hot-update", types.MergePatchType,
		fmt.Appendf(nil, `{"data": {"Pod.solo": %q}}`, fmt.Sprintf(`{"url": "%s/v1/game.cfg", "version": "v1", "sha256": "%x"}`,
			files.URL, sha256.Sum256([]byte("max_players=32\n")))), metav1.PatchOptions{})
	require.NoError(t, err)
	pod(t, ns, "solo", labels)
	dirC := t.TempDir()
	apiC := startAgent(t, sa, ns, "solo", config(dirC), operator)
	waitRunning(t, apiC)
	assert.NoFileExists(t, filepath.Join(dirC, "game.cfg"))
	assert.Contains(t, apiC.get(t, "/metrics"), `sidecar_agent_plugin_refused_total{plugin="hot_update",reason="record_unauthenticated"} 1`)
}

// hotUpdateConfig is a config.yaml of hot_update signalling process and downloading from the
// file server at files (on loopback, so private networks are allowed), into dir.
func hotUpdateConfig(process, files string) func(dir string) string {
	return func(dir string) string {
		return fmt.Sprintf(`
plugins:
  - name: hot_update
    config:
      loadPatchType: signal
      fileDir: %s
      signal: {processName: %s, signalName: SIGUSR1}
      allowedURLPrefixes: [%s/]
      allowPrivateNetworks: true
      storageConfig:
        type: InKube
        inKube: {annotationKey: game.example.com/hot-update}
`, dir, process, files)
	}
}

// The agent's API answers only callers the API server authenticates, with a token for the agent's
// audience, and authorises; before, it answered anyone who reached its port.
func TestAPIAuthorization(t *testing.T) {
	ns := namespace(t)
	sa := agentIdentity(t, ns)
	pod(t, ns, "game-0", nil)
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("x=1\n")) }))
	defer files.Close()
	app := agenttest.StartSignalRecorder(t)
	operator := caller(t, ns, "game-operator", true)
	stranger := caller(t, ns, "stranger", false)
	dir := t.TempDir()
	api := startAgent(t, sa, ns, "game-0", hotUpdateConfig(app.Name, files.URL)(dir), operator)
	waitRunning(t, api)
	body := fmt.Sprintf(`{"url": "%s/game.cfg", "version": "v1"}`, files.URL)
	for _, tc := range []struct {
		name, method, path, token string
		code                      int
	}{
		{"liveness needs nothing", "GET", "/healthz", "", 200},
		{"no token", "POST", "/plugins/hot_update/update", "", 401},
		{"no token for status", "GET", "/status", "", 401},
		{"no token for metrics", "GET", "/metrics", "", 401},
		{"a token the API server does not know", "POST", "/plugins/hot_update/update", "made-up", 401},
		// Tokens for the API server are refused: the agent could replay them there.
		{"the operator's token for the API server", "POST", "/plugins/hot_update/update", token(t, ns, "game-operator", ""), 401},
		{"a ServiceAccount without a grant", "POST", "/plugins/hot_update/update", stranger, 403},
		{"a ServiceAccount without a grant reading status", "GET", "/status", stranger, 403},
		{"the operator", "POST", "/plugins/hot_update/update", operator, 200},
		{"the operator reading status", "GET", "/status", operator, 200},
	} {
		code, out := api.call(t, tc.method, tc.path, tc.token, body)
		assert.Equal(t, tc.code, code, "%s: %s", tc.name, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "game.cfg"))
	require.NoError(t, err)
	assert.Equal(t, "x=1\n", string(got), "only the operator's update happened")
	metrics := api.get(t, "/metrics")
	for _, line := range []string{
		`sidecar_agent_api_requests_total{result="unauthenticated"} 5`,
		`sidecar_agent_api_requests_total{result="forbidden"} 2`,
	} {
		assert.Contains(t, metrics, line)
	}
}

// waitRunning waits until every plugin of the agent runs.
func waitRunning(t *testing.T, api agentAPI) {
	t.Helper()
	require.Eventually(t, func() bool {
		code, out := api.call(t, http.MethodGet, "/status", api.token, "")
		var st struct {
			Plugins []struct{ State string } `json:"plugins"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(out), &st) != nil || len(st.Plugins) == 0 {
			return false
		}
		for _, p := range st.Plugins {
			if p.State != "Running" {
				return false
			}
		}
		return true
	}, wait, tick)
}
