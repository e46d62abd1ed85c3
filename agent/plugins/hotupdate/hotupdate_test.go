package hotupdate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/agenttest"
	"github.com/sidecarops/sidecarops/agent/storage"
)

func files(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/game.cfg":
			_, _ = w.Write([]byte("max_players=64\n"))
		case "/slow/game.cfg":
			time.Sleep(3 * time.Second)
			_, _ = w.Write([]byte("late\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// config signals processName and allows downloads from the allowed prefixes, which may be on
// loopback, where the tests' file servers are.
func config(dir, processName string, allowed ...string) *Config {
	return &Config{FileDir: dir, Signal: Signal{ProcessName: processName, SignalName: "SIGHUP"}, DownloadTimeoutSeconds: 1,
		StorageConfig:      storage.Config{Type: storage.TypeInKube, InKube: &storage.InKubeConfig{AnnotationKey: "example.com/hot-update"}},
		AllowedURLPrefixes: allowed, AllowPrivateNetworks: true}
}

// started is a running plugin signalling the recorder's process, fileDir holding version 1.
func started(t *testing.T, processName string, allowed ...string) (*Plugin, *agenttest.Host, string) {
	t.Helper()
	dir := t.TempDir()
	return startedWith(t, config(dir, processName, allowed...), &agenttest.Host{T: t})
}

// startedWith is a running plugin with cfg and host, cfg.FileDir holding version 1.
func startedWith(t *testing.T, cfg *Config, host *agenttest.Host) (*Plugin, *agenttest.Host, string) {
	t.Helper()
	dir := cfg.FileDir
	require.NoError(t, os.WriteFile(filepath.Join(dir, "game.cfg"), []byte("max_players=32\n"), 0o644))
	p := New().(*Plugin)
	require.Empty(t, cfg.Validate(field.NewPath("config")))
	require.NoError(t, p.Init(cfg, host))
	require.NoError(t, p.Start(context.Background(), nil))
	t.Cleanup(func() { require.NoError(t, p.Stop(context.Background())) })
	return p, host, dir
}

func TestUpdate(t *testing.T) {
	srv := files(t)
	rec := agenttest.StartSignalRecorder(t)
	tests := []struct {
		name     string
		process  string
		req      Request
		code     int
		file     string // content of game.cfg afterwards
		signals  []string
		message  string
		recorded bool // a result was stored
		// setup adjusts the started plugin: a signal that fails, a smaller maxBytes.
		setup func(p *Plugin)
	}{
		{"applied", rec.Name, Request{URL: srv.URL + "/v2/game.cfg", Version: "v2", SHA256: sum("max_players=64\n")},
			200, "max_players=64\n", []string{"SIGHUP"}, "applied", true, nil},
		{"checksum optional", rec.Name, Request{URL: srv.URL + "/v2/game.cfg", Version: "v2"},
			200, "max_players=64\n", []string{"SIGHUP"}, "applied", true, nil},
		{"checksum mismatch", rec.Name, Request{URL: srv.URL + "/v2/game.cfg", Version: "v2", SHA256: sum("other")},
			502, "max_players=32\n", nil, "checksum mismatch", true, nil},
		{"download 404", rec.Name, Request{URL: srv.URL + "/v3/game.cfg", Version: "v3"},
			502, "max_players=32\n", nil, "status 404", true, nil},
		{"download timeout", rec.Name, Request{URL: srv.URL + "/slow/game.cfg", Version: "v3"},
			502, "max_players=32\n", nil, "Timeout", true, nil},
		{"connection refused", rec.Name, Request{URL: "http://127.0.0.1:1/game.cfg", Version: "v3"},
			502, "max_players=32\n", nil, "refused", true, nil},
		{"bad url", rec.Name, Request{URL: "ftp://example.com/game.cfg", Version: "v3"},
			400, "max_players=32\n", nil, "must be an absolute http", true, nil},
		{"no version", rec.Name, Request{URL: srv.URL + "/v2/game.cfg"},
			400, "max_players=32\n", nil, "version is required", true, nil},
		{"sha256 not a digest", rec.Name, Request{URL: srv.URL + "/v2/game.cfg", Version: "v2", SHA256: "md5:abc"},
			400, "max_players=32\n", nil, `sha256 "md5:abc" must be 64 hexadecimal digits`, true, nil},
		{"credentials in the url", rec.Name, Request{URL: "http://u:secret@" + strings.TrimPrefix(srv.URL, "http://") + "/v2/game.cfg", Version: "v2"},
			400, "max_players=32\n", nil, "must not carry credentials", true, nil},
		{"file name escaping fileDir", rec.Name, Request{URL: srv.URL + "/v2/game.cfg", Version: "v2", FileName: "../x"},
			400, "max_players=32\n", nil, "plain file name", true, nil},
		{"missing process", "no-such-process", Request{URL: srv.URL + "/v2/game.cfg", Version: "v2"},
			409, "max_players=32\n", nil, "no process \"no-such-process\"", true, nil},
		// Before, the new file stayed although the app was never told (docs/agent.md promises otherwise).
		{"signal refused: the old file is back", rec.Name, Request{URL: srv.URL + "/v2/game.cfg", Version: "v2"},
			409, "max_players=32\n", nil, "the old file is back", true, func(p *Plugin) {
				p.kill = func(int, syscall.Signal) error { return syscall.EPERM }
			}},
		{"larger than maxBytes", rec.Name, Request{URL: srv.URL + "/v2/game.cfg", Version: "v2"},
			502, "max_players=32\n", nil, "larger than maxBytes 8", true, func(p *Plugin) { p.cfg.MaxBytes = 8 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(rec.Signals(t))
			p, host, dir := started(t, tt.process, srv.URL+"/", "http://127.0.0.1:1/")
			if tt.setup != nil {
				tt.setup(p)
			}
			res, code := p.Update(context.Background(), "alice", tt.req)
			assert.Equal(t, tt.code, code, res.Message)
			assert.Equal(t, tt.code == 200, res.Success)
			assert.Contains(t, res.Message, tt.message)
			got, err := os.ReadFile(filepath.Join(dir, "game.cfg"))
			require.NoError(t, err)
			assert.Equal(t, tt.file, string(got))
			// Signals are delivered asynchronously; the recorder writes them as they arrive.
			require.Eventually(t, func() bool { return len(rec.Signals(t))-before == len(tt.signals) }, 30*time.Second, 20*time.Millisecond)
			assert.ElementsMatch(t, tt.signals, rec.Signals(t)[before:])
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range entries {
				assert.False(t, strings.HasPrefix(e.Name(), ".download-") || strings.HasPrefix(e.Name(), ".previous-"), "temporary file left: %s", e.Name())
			}
			stored := host.Stored()
			require.Len(t, stored, 1)
			var r Result
			require.NoError(t, json.Unmarshal([]byte(stored[0].Record.Value), &r))
			assert.Equal(t, res, r)
			assert.Equal(t, map[bool]string{true: "Succeeded", false: "Failed"}[res.Success], stored[0].Record.State)
			assert.Equal(t, "example.com/hot-update", stored[0].Config.InKube.AnnotationKey)
			assert.Equal(t, &r, p.Status())
		})
	}
	// A late signal would have shown up in a later case; this makes sure none arrive after the last.
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, []string{"SIGHUP", "SIGHUP"}, rec.Signals(t))
}

// The new file gets the mode of the one it replaces (the app may run as another user and read it
// through the group), or fileMode when set; before, it kept the download's 0600.
func TestUpdateFileMode(t *testing.T) {
	srv := files(t)
	rec := agenttest.StartSignalRecorder(t)
	for _, tc := range []struct {
		name string
		set  *uint32
		old  os.FileMode
		want os.FileMode
	}{
		{name: "the replaced file's", old: 0o640, want: 0o640},
		{name: "fileMode", set: ptrTo(uint32(0o600)), old: 0o644, want: 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, dir := started(t, rec.Name, srv.URL+"/")
			p.cfg.FileMode = tc.set
			target := filepath.Join(dir, "game.cfg")
			require.NoError(t, os.Chmod(target, tc.old))
			_, code := p.Update(context.Background(), "alice", Request{URL: srv.URL + "/v2/game.cfg", Version: "v2"})
			require.Equal(t, http.StatusOK, code)
			info, err := os.Stat(target)
			require.NoError(t, err)
			assert.Equal(t, tc.want, info.Mode().Perm())
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestHandler(t *testing.T) {
	srv := files(t)
	rec := agenttest.StartSignalRecorder(t)
	p, _, dir := started(t, rec.Name, srv.URL+"/")
	h := p.Handler()
	// The agent's server puts the authenticated caller in the request's context.
	post := func(body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/update", strings.NewReader(body))
		h.ServeHTTP(w, r.WithContext(agent.WithCaller(r.Context(), "system:serviceaccount:ops:operator")))
		return w
	}
	w := post(`{"url": "` + srv.URL + `/v2/game.cfg", "version": "v2", "fileName": "live.cfg"}`)
	require.Equal(t, 200, w.Code, w.Body.String())
	var res Result
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &res))
	assert.True(t, res.Success)
	assert.Equal(t, filepath.Join(dir, "live.cfg"), res.File)
	assert.Equal(t, "system:serviceaccount:ops:operator", res.RequestedBy)
	assert.Equal(t, sum("max_players=64\n"), res.SHA256)
	got, err := os.ReadFile(filepath.Join(dir, "live.cfg"))
	require.NoError(t, err)
	assert.Equal(t, "max_players=64\n", string(got))

	w = post(`{"url": "x", "unexpected": "v2"}`)
	assert.Equal(t, 400, w.Code)
	assert.Contains(t, w.Body.String(), `unknown field "unexpected"`)

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/result", nil))
	assert.Equal(t, 200, w.Code)
	var last Result
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &last))
	assert.Equal(t, res, last)

	// Without a caller (a request that did not come through the agent's server) nothing happens.
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/update", strings.NewReader(`{"url": "`+srv.URL+`/v2/game.cfg", "version": "v3", "fileName": "other.cfg"}`)))
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.NoFileExists(t, filepath.Join(dir, "other.cfg"))
	assert.Equal(t, &last, p.Status(), "nothing recorded")

	require.NoError(t, p.Stop(context.Background()))
	w = post(`{"url": "` + srv.URL + `/v2/game.cfg", "version": "v2"}`)
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
}

func TestValidate(t *testing.T) {
	good := func() Config {
		return Config{FileDir: "/data", Signal: Signal{ProcessName: "game", SignalName: "SIGUSR1"},
			StorageConfig: storage.Config{Type: storage.TypeInKube, InKube: &storage.InKubeConfig{AnnotationKey: "a.example.com/result"}}}
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		errs   []string
	}{
		{"valid", func(*Config) {}, nil},
		{"relative fileDir", func(c *Config) { c.FileDir = "data" }, []string{"config.fileDir: Invalid value: \"data\": must be an absolute directory path"}},
		{"unknown signal", func(c *Config) { c.Signal.SignalName = "HUP" }, []string{"config.signal.signalName: Invalid value: \"HUP\""}},
		{"no process", func(c *Config) { c.Signal.ProcessName = "" }, []string{"config.signal.processName: Required value"}},
		{"loadPatchType", func(c *Config) { c.LoadPatchType = "restart" }, []string{"config.loadPatchType: Unsupported value: \"restart\""}},
		{"workload key", func(c *Config) { c.Workload = "game/${SELF:POD_NAME}" }, []string{"config.workload: Invalid value: \"game/${SELF:POD_NAME}\""}},
		{"workload key with placeholders", func(c *Config) { c.Workload = "game.${SELF:POD_NAMESPACE}" }, nil},
		{"result ConfigMap name", func(c *Config) { c.ResultConfigMap = "Results" }, []string{"config.resultConfigMap: Invalid value: \"Results\""}},
		{"storage type", func(c *Config) { c.StorageConfig.Type = "Redis" }, []string{"config.storageConfig.type: Unsupported value: \"Redis\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.mutate(&c)
			errs := c.Validate(field.NewPath("config"))
			require.Len(t, errs, len(tt.errs), errs.ToAggregate())
			for i, e := range tt.errs {
				assert.Contains(t, errs[i].Error(), e)
			}
		})
	}
}

func TestFindProcesses(t *testing.T) {
	proc := t.TempDir()
	write := func(pid, comm, cmdline string) {
		require.NoError(t, os.MkdirAll(filepath.Join(proc, pid), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(proc, pid, "comm"), []byte(comm+"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(proc, pid, "cmdline"), []byte(cmdline), 0o644))
	}
	write("10", "nginx", "nginx: master process nginx\x00")
	write("11", "nginx", "nginx: worker process\x00")
	write("12", "gameserv", "/opt/game/gameserver\x00--port\x005000\x00")
	write("13", "kthreadd", "")
	require.NoError(t, os.WriteFile(filepath.Join(proc, "uptime"), []byte("1 2"), 0o644))
	tests := []struct {
		name string
		want []int
	}{
		{"nginx: master process nginx", []int{10}}, // the whole rewritten command line
		{"nginx", []int{10, 11}},                   // comm
		{"gameserver", []int{12}},                  // the executable's base name
		{"/opt/game/gameserver --port 5000", []int{12}},
		{"kthreadd", []int{13}},
		{"absent", nil},
	}
	for _, tt := range tests {
		got, err := findProcesses(proc, tt.name)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, tt.name)
	}
	_, err := findProcesses(filepath.Join(proc, "missing"), "x")
	assert.Error(t, err)
}

// kube is API access backed by a fake API server holding objs.
func kube(objs ...runtime.Object) *storage.Kube {
	return &storage.Kube{Client: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), objs...),
		Self: storage.Self{PodName: "game-0", PodNamespace: "games"}}
}

func resultConfigMap(value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "sidecar-agent-hot-update", "namespace": "games"},
		"data":     map[string]any{"Deployment.game": value}}}
}

// The workload's latest version records who asked for it, so that pods restore only what an
// authenticated request wrote.
func TestUpdateRecordsCaller(t *testing.T) {
	srv := files(t)
	rec := agenttest.StartSignalRecorder(t)
	api := kube()
	cfg := config(t.TempDir(), rec.Name, srv.URL+"/")
	cfg.Workload = "Deployment.game"
	p, _, _ := startedWith(t, cfg, &agenttest.Host{T: t, API: api})
	_, code := p.Update(context.Background(), "system:serviceaccount:ops:operator", Request{URL: srv.URL + "/v2/game.cfg", Version: "v2"})
	require.Equal(t, http.StatusOK, code)
	v, found, err := api.GetKey(context.Background(), "sidecar-agent-hot-update", "Deployment.game")
	require.NoError(t, err)
	require.True(t, found)
	assert.JSONEq(t, `{"url": "`+srv.URL+`/v2/game.cfg", "version": "v2", "sha256": "`+sum("max_players=64\n")+`", "fileName": "game.cfg",
		"requestedBy": "system:serviceaccount:ops:operator"}`, v)
}

// Before, a new pod downloaded whatever URL the result ConfigMap named: written by anyone who
// reached the agent's port, or by anyone who can write the ConfigMap.
func TestRestore(t *testing.T) {
	srv, hits := counted(t)
	other, _ := counted(t)
	rec := agenttest.StartSignalRecorder(t)
	v2 := sum("max_players=64\n")
	record := func(url, sha, by string) string {
		return string(toJSON(latest{Request: Request{URL: url, Version: "v2", SHA256: sha, FileName: "game.cfg"}, RequestedBy: by}))
	}
	tests := []struct {
		name     string
		record   string
		private  bool   // allowPrivateNetworks
		startErr string // "" Start succeeds
		file     string // game.cfg afterwards
		refused  []string
		hits     int32
	}{
		{name: "written by an authenticated request", record: record(srv.URL+"/v2/game.cfg", v2, "alice"), private: true,
			file: "max_players=64\n", hits: 1},
		{name: "written before requests were authenticated", record: `{"url": "` + srv.URL + `/v2/game.cfg", "version": "v2", "sha256": "` + v2 + `"}`,
			private: true, file: "max_players=32\n", refused: []string{"record_unauthenticated"}},
		{name: "outside allowedURLPrefixes", record: record(other.URL+"/v2/game.cfg", v2, "alice"), private: true,
			file: "max_players=32\n", refused: []string{"record_not_allowed"}},
		{name: "without a checksum", record: record(srv.URL+"/v2/game.cfg", "", "alice"), private: true,
			file: "max_players=32\n", refused: []string{"record_not_allowed"}},
		{name: "an address refused now", record: record(srv.URL+"/v2/game.cfg", v2, "alice"), private: false,
			file: "max_players=32\n", refused: []string{"private_address"}},
		// The file is not what the requester got: the start fails, and restartPolicy retries.
		{name: "the file changed since", record: record(srv.URL+"/v2/game.cfg", sum("other"), "alice"), private: true,
			startErr: "checksum mismatch", file: "max_players=32\n", refused: []string{"checksum_mismatch"}, hits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits.Store(0)
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "game.cfg"), []byte("max_players=32\n"), 0o644))
			cfg := config(dir, rec.Name, srv.URL+"/")
			cfg.Workload, cfg.AllowPrivateNetworks = "Deployment.game", tt.private
			host := &agenttest.Host{T: t, API: kube(resultConfigMap(tt.record))}
			p := New().(*Plugin)
			require.NoError(t, p.Init(cfg, host))
			err := p.Start(context.Background(), nil)
			t.Cleanup(func() { require.NoError(t, p.Stop(context.Background())) })
			if tt.startErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tt.startErr)
			}
			got, err := os.ReadFile(filepath.Join(dir, "game.cfg"))
			require.NoError(t, err)
			assert.Equal(t, tt.file, string(got))
			assert.Equal(t, tt.refused, host.Refusals())
			assert.Equal(t, tt.hits, hits.Load())
			if tt.file == "max_players=64\n" {
				res := p.Status().(*Result)
				assert.Equal(t, "alice", res.RequestedBy)
				assert.Equal(t, "restored the workload's latest version", res.Message)
			}
		})
	}
}
