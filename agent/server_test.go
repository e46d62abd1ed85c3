package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/agent/agenttest"
	"github.com/sidecarops/sidecarops/internal/kubeauth"
)

// authz stands for the API server's reviews: "admin" may do anything, "viewer" only get, "broken"
// gets no answer, "flood" is a new token from a source that has had too many; any other token is
// unknown.
type authz struct {
	mu    sync.Mutex
	asked []Access
}

func (z *authz) Authorize(_ context.Context, c Credentials, a Access) (string, error) {
	z.mu.Lock()
	z.asked = append(z.asked, a)
	z.mu.Unlock()
	switch token := c.Token; {
	case token == "admin", token == "viewer" && a.Verb == "get":
		return "system:serviceaccount:ops:" + token, nil
	case token == "viewer":
		return "system:serviceaccount:ops:viewer", fmt.Errorf("%w: viewer may not %s", ErrForbidden, a.Verb)
	case token == "broken":
		return "", errors.New("TokenReview: connection refused")
	case token == "flood":
		return "", &kubeauth.Throttled{Reason: "source", RetryAfter: 1500 * time.Millisecond}
	}
	return "", fmt.Errorf("%w: unknown token", ErrUnauthenticated)
}

// echo is a plugin answering with what reaches it: the caller and any Authorization header.
type echo struct{ testPlugin }

func (e *echo) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "caller=%s authorization=%q", Caller(r.Context()), r.Header.Get("Authorization"))
	})
}

// Before, every endpoint answered anyone: the API had no authentication at all.
func TestAPIAuthentication(t *testing.T) {
	reg := Registry{"hot_update": func() Plugin { return &echo{testPlugin{name: "hot_update", j: &journal{}}} }}
	c, err := ParseConfig("config.yaml", []byte("plugins: [{name: hot_update}]"), reg)
	require.NoError(t, err)
	type answer struct {
		code int
		body string // contained in the body
	}
	tests := []struct {
		name, method, path, auth string
		closed                   bool // the agent runs without an Authorizer (--no-kube)
		want                     answer
		retryAfter               string
		asked                    *Access
	}{
		{name: "healthz is open", method: "GET", path: "/healthz", want: answer{200, "ok"}},
		{name: "status without a token", method: "GET", path: "/status", want: answer{401, "a bearer token is required"}},
		{name: "metrics without a token", method: "GET", path: "/metrics", want: answer{401, "a bearer token is required"}},
		{name: "plugin without a token", method: "POST", path: "/plugins/hot_update/update", want: answer{401, "a bearer token is required"}},
		{name: "no such plugin without a token: nothing told", method: "POST", path: "/plugins/other/x", want: answer{401, ""}},
		{name: "basic auth is no token", method: "GET", path: "/status", auth: "Basic YWRtaW46YWRtaW4=", want: answer{401, "a bearer token is required"}},
		{name: "unknown token", method: "POST", path: "/plugins/hot_update/update", auth: "Bearer made-up",
			want: answer{401, "not accepted"}, asked: &Access{"update", "hot_update"}},
		{name: "forbidden", method: "POST", path: "/plugins/hot_update/update", auth: "Bearer viewer",
			want: answer{403, "viewer may not update"}, asked: &Access{"update", "hot_update"}},
		{name: "no answer from the API server", method: "GET", path: "/status", auth: "Bearer broken",
			want: answer{503, "could not be authorised"}, asked: &Access{Verb: "get"}},
		{name: "too many new tokens", method: "GET", path: "/status", auth: "Bearer flood",
			want: answer{429, "too many new tokens"}, retryAfter: "2", asked: &Access{Verb: "get"}},
		{name: "status allowed", method: "GET", path: "/status", auth: "Bearer viewer", want: answer{200, `"version"`}, asked: &Access{Verb: "get"}},
		{name: "metrics allowed", method: "GET", path: "/metrics", auth: "bearer viewer", want: answer{200, "sidecar_agent_api_requests_total"}, asked: &Access{Verb: "get"}},
		// The plugin learns who called, and never sees the token.
		{name: "plugin allowed", method: "POST", path: "/plugins/hot_update/update", auth: "Bearer admin",
			want: answer{200, `caller=system:serviceaccount:ops:admin authorization=""`}, asked: &Access{"update", "hot_update"}},
		{name: "GET of a plugin is get", method: "GET", path: "/plugins/hot_update/result", auth: "Bearer viewer",
			want: answer{200, "caller=system:serviceaccount:ops:viewer"}, asked: &Access{"get", "hot_update"}},
		{name: "no such plugin, authenticated", method: "GET", path: "/plugins/other/x", auth: "Bearer admin",
			want: answer{404, "no plugin other"}, asked: &Access{"get", "other"}},
		// Without the Kubernetes API nobody can be authenticated: closed, not open.
		{name: "closed without an authorizer", method: "POST", path: "/plugins/hot_update/update", auth: "Bearer admin", closed: true,
			want: answer{401, "without the Kubernetes API"}},
		{name: "closed status", method: "GET", path: "/status", auth: "Bearer admin", closed: true, want: answer{401, "its API is closed"}},
		{name: "healthz open when closed", method: "GET", path: "/healthz", closed: true, want: answer{200, "ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewManager(ManagerOptions{Registry: reg, Logger: testr.New(t)})
			require.NoError(t, m.Setup(c))
			z := &authz{}
			var a Authorizer = z
			if tt.closed {
				a = nil
			}
			srv := NewServer(m, a)
			srv.setConfig("config.yaml", c)
			r := httptest.NewRequest(tt.method, tt.path, strings.NewReader("{}"))
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, r)
			body, _ := io.ReadAll(w.Body)
			assert.Equal(t, tt.want.code, w.Code, string(body))
			assert.Contains(t, string(body), tt.want.body)
			if tt.want.code == 401 {
				assert.Equal(t, `Bearer realm="sidecar-agent"`, w.Header().Get("WWW-Authenticate"))
			}
			assert.Equal(t, tt.retryAfter, w.Header().Get("Retry-After"))
			if tt.asked == nil {
				assert.Empty(t, z.asked, "no token, no review")
			} else {
				assert.Equal(t, []Access{*tt.asked}, z.asked)
			}
		})
	}
}

func TestAPIMetrics(t *testing.T) {
	m := NewManager(ManagerOptions{Registry: Registry{}, Logger: testr.New(t)})
	h := NewServer(m, &authz{}).Handler()
	for _, token := range []string{"", "made-up", "viewer", "broken", "flood", "flood", "admin"} {
		r := httptest.NewRequest("POST", "/plugins/x/y", nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	r := httptest.NewRequest("GET", "/metrics", nil)
	r.Header.Set("Authorization", "Bearer admin")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	for _, line := range []string{
		`sidecar_agent_api_requests_total{result="unauthenticated"} 2`,
		`sidecar_agent_api_requests_total{result="forbidden"} 1`,
		`sidecar_agent_api_requests_total{result="error"} 1`,
		`sidecar_agent_api_requests_total{result="throttled"} 2`,
		`sidecar_agent_auth_throttled_total{reason="source"} 2`,
		`sidecar_agent_api_requests_total{result="allowed"} 2`, // admin's POST and this GET
	} {
		assert.Contains(t, w.Body.String(), line)
	}
}

// Issue 28: every review without an answer logged an ERROR line, so anyone reaching the port could
// fill the log; now the first few of each kind are logged, then one per interval with the count of
// those skipped. The requests are still answered and counted one by one.
func TestAPIRefusalsLoggedSampled(t *testing.T) {
	var lines agenttest.LogLines
	m := NewManager(ManagerOptions{Registry: Registry{}, Logger: logr.New(&lines)})
	h := NewServer(m, &authz{}).Handler()
	codes := map[int]int{}
	for _, token := range []string{"broken", "flood"} {
		for range 100 {
			r := httptest.NewRequest("GET", "/status", nil)
			r.Header.Set("Authorization", "Bearer "+token)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			codes[w.Code]++
		}
	}
	assert.Equal(t, map[int]int{http.StatusServiceUnavailable: 100, http.StatusTooManyRequests: 100}, codes)
	assert.Equal(t, int64(5), lines.Errors.Load(), "ERROR lines")
	assert.Equal(t, int64(5), lines.Infos.Load(), "throttled lines")
}
