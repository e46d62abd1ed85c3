package httpprobe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/agent/agenttest"
	"github.com/sidecarops/sidecarops/agent/storage"
)

var store = storage.Config{Type: storage.TypeInKube, InKube: &storage.InKubeConfig{AnnotationKey: "example.com/probe"}}

// game answers like a game server's state endpoint.
func game(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/state":
			if r.Header.Get("Authorization") != "Bearer t0ken" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(`{"server": {"state": "idle"}, "players": 0}`))
		case "/health":
			if r.Method != http.MethodHead {
				w.WriteHeader(http.StatusMethodNotAllowed)
			}
		case "/created":
			w.WriteHeader(http.StatusCreated)
		case "/slow":
			time.Sleep(3 * time.Second)
		case "/text":
			_, _ = w.Write([]byte("idle"))
		case "/redirect":
			http.Redirect(w, r, "/health", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// closedPort is a local port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestProbe(t *testing.T) {
	srv := game(t)
	auth := map[string]string{"Authorization": "Bearer t0ken"}
	tests := []struct {
		name   string
		ep     Endpoint
		state  string
		ok     bool
		detail string
	}{
		{"state from the response", Endpoint{URL: srv.URL + "/state", Headers: auth, StateJSONPath: "/server/state"}, "idle", true, "/server/state=idle"},
		{"headers are sent", Endpoint{URL: srv.URL + "/state"}, StateFailed, false, "status 401, expected 200"},
		{"method", Endpoint{URL: srv.URL + "/health", Method: http.MethodHead}, StateSucceeded, true, "status 200"},
		{"wrong method", Endpoint{URL: srv.URL + "/health"}, StateFailed, false, "status 405"},
		{"expected status", Endpoint{URL: srv.URL + "/created", ExpectedStatusCode: 201}, StateSucceeded, true, "status 201"},
		{"unexpected status", Endpoint{URL: srv.URL + "/created"}, StateFailed, false, "status 201, expected 200"},
		{"redirect not followed", Endpoint{URL: srv.URL + "/redirect"}, StateFailed, false, "status 302"},
		{"not found", Endpoint{URL: srv.URL + "/nope"}, StateFailed, false, "status 404"},
		{"timeout", Endpoint{URL: srv.URL + "/slow", Timeout: 1}, StateFailed, false, "context deadline exceeded"},
		{"connection refused", Endpoint{URL: "http://" + closedPort(t) + "/state"}, StateFailed, false, "connection refused"},
		{"state path missing", Endpoint{URL: srv.URL + "/state", Headers: auth, StateJSONPath: "/server/mode"}, StateUnknown, false, "no string at /server/mode"},
		{"state not a string", Endpoint{URL: srv.URL + "/state", Headers: auth, StateJSONPath: "/players"}, StateUnknown, false, "no string at /players"},
		{"not JSON", Endpoint{URL: srv.URL + "/text", StateJSONPath: "/state"}, StateUnknown, false, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New().(*Plugin)
			cfg := &Config{Endpoints: []Endpoint{tt.ep}}
			cfg.Endpoints[0].StorageConfig = store
			require.Empty(t, cfg.Validate(field.NewPath("config")))
			require.NoError(t, p.Init(cfg, &agenttest.Host{T: t}))
			rec, detail := p.Probe(context.Background(), p.cfg.Endpoints[0])
			assert.Equal(t, storage.Record{Value: tt.state, State: tt.state, OK: tt.ok}, rec)
			assert.Contains(t, detail, tt.detail)
		})
	}
}

// The plugin probes on its period and stores every outcome; a failing store is reported in its
// status, not fatal.
func TestProbeLoop(t *testing.T) {
	srv := game(t)
	host := &agenttest.Host{T: t}
	p := New().(*Plugin)
	cfg := &Config{Endpoints: []Endpoint{
		{URL: srv.URL + "/health", Method: http.MethodHead, PeriodSeconds: 1, StorageConfig: store},
		{URL: srv.URL + "/nope", PeriodSeconds: 1, StorageConfig: store},
	}}
	require.NoError(t, p.Init(cfg, host))
	failed := make(chan error, 1)
	require.NoError(t, p.Start(context.Background(), failed))
	require.Eventually(t, func() bool { return len(host.Stored()) >= 4 }, time.Minute, 20*time.Millisecond)
	host.FailStores(assert.AnError)
	require.Eventually(t, func() bool {
		st := p.Status().([]EndpointStatus)
		return st[0].StoreError != "" && st[1].StoreError != ""
	}, time.Minute, 20*time.Millisecond)
	require.NoError(t, p.Stop(context.Background()))
	n := len(host.Stored())
	st := p.Status().([]EndpointStatus)
	assert.Equal(t, StateSucceeded, st[0].State)
	assert.Equal(t, StateFailed, st[1].State)
	assert.Contains(t, st[1].Detail, "status 404")
	assert.Contains(t, st[0].StoreError, assert.AnError.Error())
	states := map[string]bool{}
	for _, s := range host.Stored() {
		states[s.Record.State] = true
		assert.Equal(t, store, s.Config)
	}
	assert.Equal(t, map[string]bool{StateSucceeded: true, StateFailed: true}, states)
	assert.Empty(t, failed, "a failing probe or store is a result, not a plugin failure")
	time.Sleep(1500 * time.Millisecond)
	assert.Len(t, host.Stored(), n, "no probe after Stop")
}

func TestStartDelay(t *testing.T) {
	srv := game(t)
	host := &agenttest.Host{T: t}
	p := New().(*Plugin)
	require.NoError(t, p.Init(&Config{StartDelaySeconds: 2, Endpoints: []Endpoint{{URL: srv.URL + "/created", ExpectedStatusCode: 201, StorageConfig: store}}}, host))
	begin := time.Now()
	require.NoError(t, p.Start(context.Background(), nil))
	defer func() { require.NoError(t, p.Stop(context.Background())) }()
	require.Eventually(t, func() bool { return len(host.Stored()) == 1 }, time.Minute, 20*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(begin), 2*time.Second, "the first probe waits startDelaySeconds")
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		errs []string
	}{
		{"valid", Config{Endpoints: []Endpoint{{URL: "http://localhost:8080/state", StorageConfig: store}}}, nil},
		{"no endpoints", Config{}, []string{"config.endpoints: Required value"}},
		{"every field", Config{StartDelaySeconds: -1, Endpoints: []Endpoint{{URL: "localhost:8080", Method: "get", Timeout: -1, PeriodSeconds: -2,
			ExpectedStatusCode: 42, StateJSONPath: "state", StorageConfig: storage.Config{Type: "InKube"}}}}, []string{
			"config.startDelaySeconds: Invalid value: -1",
			"config.endpoints[0].url: Invalid value: \"localhost:8080\": must be an absolute http:// or https:// URL",
			"config.endpoints[0].method: Invalid value: \"get\"",
			"config.endpoints[0].timeout: Invalid value: -1",
			"config.endpoints[0].periodSeconds: Invalid value: -2",
			"config.endpoints[0].expectedStatusCode: Invalid value: 42",
			"config.endpoints[0].stateJSONPath: Invalid value: \"state\": must be a JSON pointer",
			"config.endpoints[0].storageConfig.inKube: Required value",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.cfg.Validate(field.NewPath("config"))
			require.Len(t, errs, len(tt.errs), errs.ToAggregate())
			for i, e := range tt.errs {
				assert.Contains(t, errs[i].Error(), e)
			}
		})
	}
}
