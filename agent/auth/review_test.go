package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/storage"
	"github.com/sidecarops/sidecarops/internal/kubeauth"
	"github.com/sidecarops/sidecarops/internal/testing/reviewserver"
)

// newAPIServer knows three tokens, one of them issued for the API server's audience rather than the
// agent's, and grants "user verb subresource" on sidecaragents.sidecarops.io named game-0 in games.
func newAPIServer() *reviewserver.Server {
	operator := authenticationv1.UserInfo{Username: "system:serviceaccount:ops:operator", UID: "u-1",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ops"}, Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"operator-0"}}}
	grants := map[string]bool{
		"system:serviceaccount:ops:operator update hot_update": true,
		"system:serviceaccount:ops:operator get ":              true,
		"system:serviceaccount:ops:viewer get ":                true,
	}
	return &reviewserver.Server{
		Tokens: map[string]authenticationv1.UserInfo{"operator-token": operator, "api-audience-token": operator,
			"viewer-token": {Username: "system:serviceaccount:ops:viewer"}},
		Audiences: map[string][]string{"operator-token": {"sidecar-agent"}, "api-audience-token": {reviewserver.APIAudience},
			"viewer-token": {"sidecar-agent"}},
		Allow: func(ns string, spec authzv1.SubjectAccessReviewSpec) bool {
			ra := spec.ResourceAttributes
			return ns == "games" && ra != nil && ra.Group == "sidecarops.io" && ra.Resource == "sidecaragents" && ra.Namespace == "games" &&
				ra.Name == "game-0" && grants[spec.User+" "+ra.Verb+" "+ra.Subresource]
		},
	}
}

func reviewer(s *reviewserver.Server, clock *clocktesting.FakeClock) *Reviewer {
	return NewReviewer(Options{Client: s.Client(), Self: storage.Self{PodName: "game-0", PodNamespace: "games"},
		Audiences: []string{"sidecar-agent"}, Resource: schema.GroupResource{Group: "sidecarops.io", Resource: "sidecaragents"}, Clock: clock})
}

func TestAuthorize(t *testing.T) {
	update := agent.Access{Verb: "update", Plugin: "hot_update"}
	tests := []struct {
		name  string
		token string
		a     agent.Access
		user  string
		err   error  // nil: allowed
		msg   string // in the error
	}{
		{"granted update of the plugin", "operator-token", update, "system:serviceaccount:ops:operator", nil, ""},
		{"granted reading status", "viewer-token", agent.Access{Verb: "get"}, "system:serviceaccount:ops:viewer", nil, ""},
		{"reading is not updating", "viewer-token", update, "system:serviceaccount:ops:viewer", agent.ErrForbidden,
			`user "system:serviceaccount:ops:viewer" may not update sidecaragents.sidecarops.io/hot_update "game-0" in namespace games`},
		{"a grant on one plugin is not one on another", "operator-token", agent.Access{Verb: "update", Plugin: "http_probe"},
			"system:serviceaccount:ops:operator", agent.ErrForbidden, "may not update sidecaragents.sidecarops.io/http_probe"},
		{"unknown token", "made-up", update, "", agent.ErrUnauthenticated, "invalid bearer token"},
		// A token for the API server would let the agent act as its caller there: refused.
		{"token for another audience", "api-audience-token", update, "", agent.ErrUnauthenticated, "did not authenticate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newAPIServer()
			r := reviewer(s, clocktesting.NewFakeClock(time.Now()))
			user, err := r.Authorize(context.Background(), agent.Credentials{Token: tt.token, Source: "192.0.2.1"}, tt.a)
			assert.Equal(t, tt.user, user)
			if tt.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.err)
				assert.Contains(t, err.Error(), tt.msg)
			}
		})
	}
}

// The review carries the caller's whole identity, so RBAC and admission see the user the API
// server authenticated, and names the agent's own pod in its own namespace.
func TestReviewsSent(t *testing.T) {
	s := newAPIServer()
	r := reviewer(s, clocktesting.NewFakeClock(time.Now()))
	_, err := r.Authorize(context.Background(), agent.Credentials{Token: "operator-token", Source: "192.0.2.1"}, agent.Access{Verb: "update", Plugin: "hot_update"})
	require.NoError(t, err)
	reviews := s.Reviews()
	require.Len(t, reviews, 2)
	assert.Equal(t, authenticationv1.TokenReviewSpec{Token: "operator-token", Audiences: []string{"sidecar-agent"}}, reviews[0].(*authenticationv1.TokenReview).Spec)
	sar := reviews[1].(*authzv1.LocalSubjectAccessReview)
	assert.Equal(t, "games", sar.Namespace)
	assert.Equal(t, authzv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: "games", Verb: "update", Group: "sidecarops.io",
			Resource: "sidecaragents", Subresource: "hot_update", Name: "game-0"},
		User: "system:serviceaccount:ops:operator", UID: "u-1", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ops"},
		Extra: map[string]authzv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"operator-0"}},
	}, sar.Spec)
}

// Issue 28: before, every new token cost a TokenReview through client-go's default rate limiter,
// so a flood of made-up tokens from one address queued there, and a caller elsewhere with a valid
// new token waited behind it until its review timed out: 503. Now
// the flood's source spends its own allowance and is answered 429 at once, the valid caller is
// reviewed at once, and the API server is asked no more than the limits allow.
func TestFloodOfMadeUpTokens(t *testing.T) {
	const (
		flooder, caller = "198.51.100.66:40000", "203.0.113.7:40000"
		connections     = 100
		perConnection   = 50
		reviewTimeout   = 10 * time.Second // kubeauth's, a generous bound for an answer
	)
	s := newAPIServer()
	api := httptest.NewServer(s.Handler())
	defer api.Close()
	client, err := kubernetes.NewForConfig(kubeauth.ClientConfig(&rest.Config{Host: api.URL}))
	require.NoError(t, err)
	r := NewReviewer(Options{Client: client, Self: storage.Self{PodName: "game-0", PodNamespace: "games"},
		Audiences: []string{"sidecar-agent"}, Resource: schema.GroupResource{Group: "sidecarops.io", Resource: "sidecaragents"}})
	h := agent.NewServer(agent.NewManager(agent.ManagerOptions{Registry: agent.Registry{}, Logger: logr.Discard()}), r).Handler()
	get := func(token, remote string) int {
		req := httptest.NewRequest("GET", "/status", nil)
		req.RemoteAddr = remote
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	tokenReviews := func() int {
		n := 0
		for _, review := range s.Reviews() {
			if _, ok := review.(*authenticationv1.TokenReview); ok {
				n++
			}
		}
		return n
	}

	start := time.Now()
	done := make(chan struct{})
	codes := make(chan int, connections*perConnection)
	var wg sync.WaitGroup
	for c := range connections {
		wg.Go(func() {
			for i := range perConnection {
				select {
				case <-done:
					return
				default:
				}
				codes <- get(fmt.Sprintf("made-up-%d-%d", c, i), flooder)
			}
		})
	}
	require.Eventually(t, func() bool { return tokenReviews() >= kubeauth.DefaultLimits.PerSourceBurst }, reviewTimeout, time.Millisecond,
		"the flood is under way")
	asked := time.Now()
	code := get("viewer-token", caller)
	answered := time.Since(asked)
	close(done)
	wg.Wait()
	elapsed := time.Since(start)
	close(codes)

	assert.Equal(t, http.StatusOK, code, "the valid caller, after %v", answered)
	assert.Less(t, answered, reviewTimeout)
	count, total := map[int]int{}, 0
	for c := range codes {
		count[c]++
		total++
	}
	assert.Positive(t, count[http.StatusTooManyRequests], "the flood is throttled: %v", count)
	assert.Equal(t, total, count[http.StatusUnauthorized]+count[http.StatusTooManyRequests],
		"the flood is refused or throttled, never left without an answer: %v", count)
	limit := kubeauth.DefaultLimits.PerSourceBurst + int(float64(kubeauth.DefaultLimits.PerSource)*elapsed.Seconds()) + 1
	assert.LessOrEqual(t, tokenReviews(), limit, "TokenReviews: the flood's source's allowance in %v, and the valid caller's", elapsed)
	// A token already known is not refused for what its source sends.
	assert.Equal(t, http.StatusOK, get("viewer-token", flooder))
}
