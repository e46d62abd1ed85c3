package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	sa := agentIdentity(t, ns)
	pod(t, ns, "game-0", nil)
	ctx := context.Background()
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
	pod(t, ns, "game-0", map[string]any{"app": "game"})
	create(t, ns, gameServers, map[string]any{"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServer",
		"metadata": map[string]any{"name": "game-0"}, "spec": map[string]any{"opsState": "None"}})
	g := &game{state: "idle"}
	srv := httptest.NewServer(g)
	defer srv.Close()
	base := startAgent(t, sa, ns, "game-0", fmt.Sprintf(`
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
`, srv.URL))

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
		resp, err := http.Get(base + "/status")
		require.NoError(t, err)
		defer resp.Body.Close()
		var st struct {
			Plugins []struct {
				Details []struct{ Probes int } `json:"details"`
			} `json:"plugins"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
		return st.Plugins[0].Details[0].Probes
	}
	n := probes()
	require.Eventually(t, func() bool { return probes() >= n+2 }, wait, tick)
	assert.Equal(t, rv, get(t, ns, pods, "game-0").GetResourceVersion())
	assert.Contains(t, metrics(t, base), `sidecar_agent_store_total{plugin="http_probe",result="unchanged"}`)

	g.set("allocated")
	expect(seen{"allocated", "10", "false", "allocated", "True", "allocated"})
	g.set("down")
	// Failed has no marker policy: the markers of the last known state stay.
	expect(seen{"Failed", "10", "false", "Failed", "False", "Failed"})
	// The labels the agent does not manage are untouched.
	assert.Equal(t, "game", get(t, ns, pods, "game-0").GetLabels()["app"])
}

func metrics(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
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
	config := func(dir string) string {
		return fmt.Sprintf(`
plugins:
  - name: hot_update
    config:
      loadPatchType: signal
      fileDir: %s
      signal: {processName: %s, signalName: SIGUSR1}
      storageConfig:
        type: InKube
        inKube: {annotationKey: game.example.com/hot-update}
`, dir, app.Name)
	}
	dirA := t.TempDir()
	baseA := startAgent(t, sa, ns, "game-7d9f8-a", config(dirA))
	waitRunning(t, baseA)

	update := func(base, body string) (int, hotupdate.Result) {
		resp, err := http.Post(base+"/plugins/hot_update/update", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var res hotupdate.Result
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
		return resp.StatusCode, res
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
		code, res := update(baseA, fmt.Sprintf(`{"url": "%s/%s/game.cfg", "version": "%s"}`, files.URL, v, v))
		require.Equal(t, 200, code, res.Message)
		assert.True(t, res.Success)
		assert.Equal(t, filepath.Join(dirA, "game.cfg"), res.File)
		assert.Equal(t, res, annotation("game-7d9f8-a"))
		require.Eventually(t, func() bool { return len(app.Signals(t)) == i+1 }, wait, tick)
		assert.Equal(t, "SIGUSR1", app.Signals(t)[i])
	}
	content, err := os.ReadFile(filepath.Join(dirA, "game.cfg"))
	require.NoError(t, err)
	assert.Equal(t, "max_players=64\n", string(content))
	var rec hotupdate.Request
	require.NoError(t, json.Unmarshal([]byte(latest()["Deployment.game"]), &rec))
	assert.Equal(t, hotupdate.Request{URL: files.URL + "/v2/game.cfg", Version: "v2", SHA256: annotation("game-7d9f8-a").SHA256, FileName: "game.cfg"}, rec)

	// A failed download keeps the file, reports the failure and leaves the workload's latest.
	code, res := update(baseA, fmt.Sprintf(`{"url": "%s/v3/game.cfg", "version": "v3"}`, files.URL))
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
	startAgent(t, sa, ns, "game-7d9f8-b", config(dirB))
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dirB, "game.cfg"))
		return err == nil && string(b) == "max_players=64\n"
	}, wait, tick)
	require.Eventually(t, func() bool {
		v := get(t, ns, pods, "game-7d9f8-b").GetAnnotations()["game.example.com/hot-update"]
		return strings.Contains(v, `"version":"v2"`) && strings.Contains(v, `"success":true`)
	}, wait, tick)
	assert.Equal(t, "restored the workload's latest version", annotation("game-7d9f8-b").Message)
}

// waitRunning waits until every plugin of the agent at base runs.
func waitRunning(t *testing.T, base string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var st struct {
			Plugins []struct{ State string } `json:"plugins"`
		}
		if json.NewDecoder(resp.Body).Decode(&st) != nil || len(st.Plugins) == 0 {
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
