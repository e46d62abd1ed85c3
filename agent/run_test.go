package agent

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// get asks as a caller allowed everything (see authz).
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer admin")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func status(t *testing.T, base string) StatusReport {
	t.Helper()
	code, body := get(t, base+"/status")
	require.Equal(t, 200, code)
	var rep StatusReport
	require.NoError(t, json.Unmarshal([]byte(body), &rep))
	return rep
}

// writeFile replaces path atomically, as the kubelet swaps a mounted ConfigMap.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(data), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

func TestRun(t *testing.T) {
	j := &journal{}
	reg := registry(j, "probe", "update")
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, "plugins: [{name: probe, config: {tag: one}}]\nresources: {CPU: 100m}\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunOptions{
			ManagerOptions: ManagerOptions{Registry: reg, Logger: testr.New(t)},
			ConfigPath:     path, Listener: ln, ReloadInterval: 20 * time.Millisecond, Authorizer: &authz{},
		})
	}()
	require.Eventually(t, func() bool { return j.count("probe:start") == 1 }, time.Minute, 10*time.Millisecond)

	code, body := get(t, base+"/healthz")
	assert.Equal(t, 200, code)
	assert.Equal(t, "ok\n", body)
	rep := status(t, base)
	assert.Equal(t, Version, rep.Version)
	assert.Equal(t, ConfigStatus{File: path, RestartPolicy: RestartAlways, Resources: Resources{CPU: "100m"}, SidecarStartOrder: "Before"}, rep.Config)
	require.Len(t, rep.Plugins, 1)
	assert.Equal(t, "probe", rep.Plugins[0].Name)
	assert.Equal(t, "v1", rep.Plugins[0].Version)
	assert.Equal(t, StateRunning, rep.Plugins[0].State)
	assert.Equal(t, map[string]any{"starts": 1.0}, rep.Plugins[0].Details)
	code, body = get(t, base+"/plugins/probe/anything")
	assert.Equal(t, 200, code)
	assert.Equal(t, "probe /anything tag=one", body)
	code, _ = get(t, base+"/plugins/update/anything")
	assert.Equal(t, 404, code)
	code, body = get(t, base+"/metrics")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, `sidecar_agent_plugin_up{plugin="probe"} 1`)

	// A changed config.yaml is applied: the changed plugin restarts, the new one starts.
	writeFile(t, path, "plugins: [{name: probe, config: {tag: two}}, {name: update, bootOrder: 1}]\n")
	require.Eventually(t, func() bool { return j.count("update:start") == 1 }, time.Minute, 10*time.Millisecond)
	assert.Equal(t, 2, j.count("probe:start"))
	_, body = get(t, base+"/plugins/probe/x")
	assert.Equal(t, "probe /x tag=two", body)
	code, _ = get(t, base+"/plugins/update/x")
	assert.Equal(t, 200, code)

	// An invalid one is rejected and reported; the running plugins stay.
	writeFile(t, path, "plugins: [{name: probe, config: {tag: three, bad: 1}}]\n")
	require.Eventually(t, func() bool { return status(t, base).Config.RejectedChange != "" }, time.Minute, 10*time.Millisecond)
	assert.Contains(t, status(t, base).Config.RejectedChange, path+`: plugin probe: plugins[0].config: Invalid value`)
	assert.Contains(t, status(t, base).Config.RejectedChange, `unknown field "bad"`)
	assert.Len(t, status(t, base).Plugins, 2)
	_, body = get(t, base+"/metrics")
	assert.Contains(t, body, `sidecar_agent_config_reloads_total{result="applied"} 1`)
	assert.Contains(t, body, `sidecar_agent_config_reloads_total{result="rejected"} 1`)

	// SIGTERM's context cancellation stops plugins in reverse boot order and the server.
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context ended")
	}
	ev := j.list()
	assert.Equal(t, []string{"update:stop", "probe:stop"}, ev[len(ev)-2:])
	_, err = net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	assert.Error(t, err, "the server is shut down")
}

func TestRunRefusesInvalidConfig(t *testing.T) {
	reg := registry(&journal{}, "probe")
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, "plugins: [{name: prob}]\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	err = Run(context.Background(), RunOptions{ManagerOptions: ManagerOptions{Registry: reg, Logger: testr.New(t)}, ConfigPath: path, Listener: ln})
	assert.EqualError(t, err, path+`: plugin prob: plugins[0].name: Unsupported value: "prob": supported values: "probe"`)
	err = Run(context.Background(), RunOptions{ManagerOptions: ManagerOptions{Registry: reg}, ConfigPath: path + ".missing", Listener: ln})
	assert.ErrorContains(t, err, "agent config: open "+path+".missing: no such file or directory")
}
