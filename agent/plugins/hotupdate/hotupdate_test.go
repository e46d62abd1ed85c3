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
	"k8s.io/apimachinery/pkg/util/validation/field"

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

// started is a running plugin signalling the recorder's process, fileDir holding version 1.
func started(t *testing.T, processName string) (*Plugin, *agenttest.Host, string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "game.cfg"), []byte("max_players=32\n"), 0o644))
	p := New().(*Plugin)
	host := &agenttest.Host{T: t}
	cfg := &Config{FileDir: dir, Signal: Signal{ProcessName: processName, SignalName: "SIGHUP"}, DownloadTimeoutSeconds: 1,
		StorageConfig: storage.Config{Type: storage.TypeInKube, InKube: &storage.InKubeConfig{AnnotationKey: "example.com/hot-update"}}}
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
		{"file name escaping fileDir", rec.Name, Request{URL: srv.URL + "/v2/game.cfg", Version: "v2", FileName: "../x"},
			400, "max_players=32\n", nil, "plain file name", true, nil},
		{"missing process", "no-such-process", Request{URL: srv.URL + "/v2/game.cfg", Version: "v2"},
			409, "max_players=32\n", nil, "no process \"no-such-process\"", true, nil},
		// Before, the new file stayed although the app was never told (the README promised otherwise).
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
			p, host, dir := started(t, tt.process)
			if tt.setup != nil {
				tt.setup(p)
			}
			res, code := p.Update(context.Background(), tt.req)
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
			p, _, dir := started(t, rec.Name)
			p.cfg.FileMode = tc.set
			target := filepath.Join(dir, "game.cfg")
			require.NoError(t, os.Chmod(target, tc.old))
			_, code := p.Update(context.Background(), Request{URL: srv.URL + "/v2/game.cfg", Version: "v2"})
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
	p, _, dir := started(t, rec.Name)
	h := p.Handler()
	post := func(body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/update", strings.NewReader(body)))
		return w
	}
	w := post(`{"url": "` + srv.URL + `/v2/game.cfg", "version": "v2", "fileName": "live.cfg"}`)
	require.Equal(t, 200, w.Code, w.Body.String())
	var res Result
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &res))
	assert.True(t, res.Success)
	assert.Equal(t, filepath.Join(dir, "live.cfg"), res.File)
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
