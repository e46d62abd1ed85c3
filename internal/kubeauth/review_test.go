package kubeauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecarops/sidecarops/internal/testing/reviewserver"
)

const (
	prometheus = "system:serviceaccount:monitoring:prometheus"
	viewer     = "system:serviceaccount:ops:viewer"
)

// as is a request with token from one address.
func as(token string) Credentials { return Credentials{Token: token, Source: "192.0.2.1"} }

// unlimited lets a test ask as many reviews as it likes, for what is not about Limits.
var unlimited = Limits{PerSource: rate.Inf, PerSourceBurst: 1, Global: rate.Inf, GlobalBurst: 1}

var (
	getMetrics = Attributes{NonResource: &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}
	updatePod  = Attributes{Resource: &authzv1.ResourceAttributes{Namespace: "games", Verb: "update", Resource: "pods", Name: "game-0"}}
)

// newAPIServer grants prometheus GET /metrics and viewer reading pods in games, both with tokens of
// the API server's own audience.
func newAPIServer() *reviewserver.Server {
	return &reviewserver.Server{
		Tokens:    map[string]authenticationv1.UserInfo{"prometheus-token": {Username: prometheus, Groups: []string{"system:serviceaccounts"}}, "viewer-token": {Username: viewer}},
		Audiences: map[string][]string{"prometheus-token": {"https://kubernetes.default.svc"}, "viewer-token": {"https://kubernetes.default.svc"}},
		Allow: func(ns string, spec authzv1.SubjectAccessReviewSpec) bool {
			if n := spec.NonResourceAttributes; n != nil {
				return ns == "" && spec.User == prometheus && n.Path == "/metrics" && n.Verb == "get"
			}
			r := spec.ResourceAttributes
			return ns == "games" && spec.User == viewer && r.Namespace == "games" && r.Resource == "pods" && r.Verb == "get"
		},
	}
}

func TestReview(t *testing.T) {
	tests := []struct {
		name  string
		token string
		a     Attributes
		user  string
		err   error  // nil: allowed
		msg   string // in the error
	}{
		{"metrics for their reader", "prometheus-token", getMetrics, prometheus, nil, ""},
		{"metrics for another user", "viewer-token", getMetrics, viewer, ErrForbidden, `user "system:serviceaccount:ops:viewer" may not get /metrics`},
		{"another path", "prometheus-token", Attributes{NonResource: &authzv1.NonResourceAttributes{Path: "/debug", Verb: "get"}}, prometheus, ErrForbidden, "may not get /debug"},
		{"a resource", "viewer-token", Attributes{Resource: &authzv1.ResourceAttributes{Namespace: "games", Verb: "get", Resource: "pods", Name: "game-0"}}, viewer, nil, ""},
		{"a resource refused", "viewer-token", updatePod, viewer, ErrForbidden, `may not update pods "game-0" in namespace games`},
		{"unknown token", "made-up", getMetrics, "", ErrUnauthenticated, "invalid bearer token"},
		{"no token", "", getMetrics, "", ErrUnauthenticated, "a bearer token is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReviewer(Options{Client: newAPIServer().Client()})
			user, err := r.Review(context.Background(), as(tt.token), tt.a)
			assert.Equal(t, tt.user, user)
			if tt.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.err)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

// A non-resource path is asked cluster-wide with the caller's whole identity; a question about
// nothing, or about two things, is an error, not a refusal, and asks nothing.
func TestReviewsSent(t *testing.T) {
	s := newAPIServer()
	r := NewReviewer(Options{Client: s.Client()})
	_, err := r.Review(context.Background(), as("prometheus-token"), getMetrics)
	require.NoError(t, err)
	reviews := s.Reviews()
	require.Len(t, reviews, 2)
	assert.Equal(t, authenticationv1.TokenReviewSpec{Token: "prometheus-token"}, reviews[0].(*authenticationv1.TokenReview).Spec)
	assert.Equal(t, authzv1.SubjectAccessReviewSpec{NonResourceAttributes: getMetrics.NonResource, User: prometheus,
		Groups: []string{"system:serviceaccounts"}, Extra: map[string]authzv1.ExtraValue{}}, reviews[1].(*authzv1.SubjectAccessReview).Spec)

	for _, a := range []Attributes{{}, {Resource: updatePod.Resource, NonResource: getMetrics.NonResource}} {
		_, err := r.Review(context.Background(), as("prometheus-token"), a)
		require.Error(t, err)
		assert.False(t, errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrForbidden))
	}
	assert.Len(t, s.Reviews(), 2)
}

// Answers are kept for a while (allowed longer than refused), so a busy caller costs the API server
// a review a minute; an API server that does not answer refuses the request and is asked again.
func TestCache(t *testing.T) {
	s := newAPIServer()
	clock := clocktesting.NewFakeClock(time.Now())
	r := NewReviewer(Options{Client: s.Client(), Clock: clock, Limits: unlimited})
	ctx := context.Background()

	// The same three callers each time: allowed, unknown, refused.
	askAll := func() {
		t.Helper()
		_, err := r.Review(ctx, as("prometheus-token"), getMetrics)
		require.NoError(t, err)
		_, err = r.Review(ctx, as("made-up"), getMetrics)
		require.ErrorIs(t, err, ErrUnauthenticated)
		_, err = r.Review(ctx, as("viewer-token"), getMetrics)
		require.ErrorIs(t, err, ErrForbidden)
	}
	for range 3 {
		askAll()
	}
	assert.Len(t, s.Reviews(), 5, "2 reviews for prometheus, 1 for the made-up token, 2 for the viewer")
	// Another question of a known token asks only the new question.
	_, err := r.Review(ctx, as("viewer-token"), updatePod)
	require.ErrorIs(t, err, ErrForbidden)
	assert.Len(t, s.Reviews(), 6)

	clock.Step(deniedTTL + time.Second)
	askAll()
	assert.Len(t, s.Reviews(), 8, "the refusals are asked again; the viewer's token is still known, its access is not")

	clock.Step(allowedTTL)
	s.SetDown(true)
	for range 2 {
		_, err = r.Review(ctx, as("prometheus-token"), getMetrics)
		require.Error(t, err)
		assert.False(t, errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrForbidden), "no answer is not a refusal: %v", err)
		assert.ErrorContains(t, err, "TokenReview: connection refused")
	}
	assert.Len(t, s.Reviews(), 10, "failures are not cached")

	// Made-up tokens cannot grow the caches past their bound.
	s.SetDown(false)
	for i := range 2 * cacheSize {
		_, _ = r.Review(ctx, as(fmt.Sprintf("made-up-%d", i)), getMetrics)
	}
	for _, c := range []answers{r.tokens, r.access} {
		assert.LessOrEqual(t, len(c.allowed.Keys()), cacheSize)
		assert.LessOrEqual(t, len(c.denied.Keys()), cacheSize)
	}
}

// Only a hash of a token is kept, and an answer is kept for one token and one access: another
// token of the same user, or another access, is asked again.
func TestCacheKeys(t *testing.T) {
	s := newAPIServer()
	r := NewReviewer(Options{Client: s.Client()})
	ctx := context.Background()
	_, err := r.Review(ctx, as("prometheus-token"), getMetrics)
	require.NoError(t, err)
	_, err = r.Review(ctx, as("prometheus-token"), Attributes{NonResource: &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "post"}})
	require.ErrorIs(t, err, ErrForbidden)
	sum := sha256.Sum256([]byte("prometheus-token"))
	hash := hex.EncodeToString(sum[:])
	assert.Equal(t, []any{hash}, r.tokens.allowed.Keys())
	assert.Equal(t, []any{hash + "\x00n\x00get\x00/metrics"}, r.access.allowed.Keys())
	assert.Equal(t, []any{hash + "\x00n\x00post\x00/metrics"}, r.access.denied.Keys())
	assert.Len(t, s.Reviews(), 3)

	s.Tokens["prometheus-token-2"] = s.Tokens["prometheus-token"]
	s.Audiences["prometheus-token-2"] = s.Audiences["prometheus-token"]
	_, err = r.Review(ctx, as("prometheus-token-2"), getMetrics)
	require.NoError(t, err)
	assert.Len(t, s.Reviews(), 5, "another token of the same user is reviewed again")
}
