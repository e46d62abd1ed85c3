package manager

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecarops/sidecarops/internal/kubeauth"
	"github.com/sidecarops/sidecarops/internal/testing/reviewserver"
)

// The metrics answer callers the API server authenticates and authorizes for the request's path and
// verb, and nobody else; a review that cannot be had is an error, not a pass.
func TestMetricsFilter(t *testing.T) {
	const reader = "system:serviceaccount:monitoring:prometheus"
	api := &reviewserver.Server{
		Tokens:    map[string]authenticationv1.UserInfo{"reader-token": {Username: reader}, "other-token": {Username: "system:serviceaccount:ops:other"}},
		Audiences: map[string][]string{"reader-token": {"https://kubernetes.default.svc"}, "other-token": {"https://kubernetes.default.svc"}},
		// As the ClusterRole sidecarops-metrics-reader grants it.
		Allow: func(ns string, spec authzv1.SubjectAccessReviewSpec) bool {
			n := spec.NonResourceAttributes
			return ns == "" && n != nil && spec.User == reader && n.Path == "/metrics" && n.Verb == "get"
		},
	}
	filter, err := metricsFilterOf(kubeauth.NewReviewer(kubeauth.Options{Client: api.Client()}))(logr.Discard(),
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("sidecarops_metrics 1\n")) }))
	require.NoError(t, err)

	tests := []struct {
		name, method, path, auth string
		code                     int
		body                     string
	}{
		{"the reader", "GET", "/metrics", "Bearer reader-token", 200, "sidecarops_metrics 1"},
		{"the scheme in any case", "GET", "/metrics", "bearer reader-token", 200, "sidecarops_metrics 1"},
		{"no token", "GET", "/metrics", "", 401, "Unauthorized"},
		{"basic credentials are no token", "GET", "/metrics", "Basic cmVhZGVyOnB3", 401, "Unauthorized"},
		{"an unknown token", "GET", "/metrics", "Bearer made-up", 401, "Unauthorized"},
		{"another user", "GET", "/metrics", "Bearer other-token", 403, "Authorization denied for user system:serviceaccount:ops:other"},
		{"another verb", "POST", "/metrics", "Bearer reader-token", 403, "Authorization denied for user " + reader},
		{"another path", "GET", "/debug/pprof/", "Bearer reader-token", 403, "Authorization denied for user " + reader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			filter.ServeHTTP(w, req)
			assert.Equal(t, tt.code, w.Code)
			assert.Equal(t, tt.body, strings.TrimSpace(w.Body.String()))
		})
	}

	// Past the limits of reviews of new tokens, a request is answered at once, without a review.
	throttled, err := metricsFilterOf(kubeauth.NewReviewer(kubeauth.Options{Client: api.Client(), Clock: clocktesting.NewFakeClock(time.Now()),
		Limits: kubeauth.Limits{PerSource: 1, PerSourceBurst: 1, Global: 1, GlobalBurst: 1}}))(logr.Discard(), http.NotFoundHandler())
	require.NoError(t, err)
	for _, want := range []struct {
		code       int
		retryAfter string
	}{{http.StatusUnauthorized, ""}, {http.StatusTooManyRequests, "1"}} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Authorization", "Bearer made-up-"+want.retryAfter)
		w := httptest.NewRecorder()
		throttled.ServeHTTP(w, req)
		assert.Equal(t, want.code, w.Code)
		assert.Equal(t, want.retryAfter, w.Header().Get("Retry-After"))
	}

	// With the API server unreachable, nobody new gets in.
	api.SetDown(true)
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Authorization", "Bearer another-token")
	w := httptest.NewRecorder()
	filter.ServeHTTP(w, req)
	assert.Equal(t, http.StatusInternalServerError, w.Code)
}
