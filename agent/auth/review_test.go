package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/storage"
)

// apiServer answers reviews as a cluster would: tokens maps a token to its user and the audiences
// it was issued for; grants lists "user verb subresource" allowed on sidecaragents.sidecarops.io.
type apiServer struct {
	mu      sync.Mutex
	tokens  map[string]authenticationv1.UserInfo
	aud     map[string][]string
	grants  map[string]bool
	down    bool
	reviews []runtime.Object
}

func (s *apiServer) client() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		s.reviews = append(s.reviews, tr.DeepCopy())
		if s.down {
			return true, nil, errors.New("connection refused")
		}
		user, ok := s.tokens[tr.Spec.Token]
		aud := s.aud[tr.Spec.Token]
		// As the API server: a token is accepted only for an audience it was issued for.
		var both []string
		for _, want := range tr.Spec.Audiences {
			for _, has := range aud {
				if want == has {
					both = append(both, want)
				}
			}
		}
		if len(tr.Spec.Audiences) == 0 {
			both = aud
		}
		if ok && len(both) > 0 {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: user, Audiences: both}
		} else {
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "localsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.LocalSubjectAccessReview).DeepCopy()
		s.reviews = append(s.reviews, sar.DeepCopy())
		if s.down {
			return true, nil, errors.New("connection refused")
		}
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = ra.Group == "sidecarops.io" && ra.Resource == "sidecaragents" && ra.Namespace == "games" &&
			ra.Name == "game-0" && s.grants[sar.Spec.User+" "+ra.Verb+" "+ra.Subresource]
		return true, sar, nil
	})
	return c
}

func (s *apiServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reviews)
}

func newAPIServer() *apiServer {
	operator := authenticationv1.UserInfo{Username: "system:serviceaccount:ops:operator", UID: "u-1",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ops"}, Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"operator-0"}}}
	return &apiServer{
		tokens: map[string]authenticationv1.UserInfo{"operator-token": operator, "api-audience-token": operator,
			"viewer-token": {Username: "system:serviceaccount:ops:viewer"}},
		aud: map[string][]string{"operator-token": {"sidecar-agent"}, "api-audience-token": {"https://kubernetes.default.svc"},
			"viewer-token": {"sidecar-agent"}},
		grants: map[string]bool{
			"system:serviceaccount:ops:operator update hot_update": true,
			"system:serviceaccount:ops:operator get ":              true,
			"system:serviceaccount:ops:viewer get ":                true,
		},
	}
}

func reviewer(s *apiServer, clock *clocktesting.FakeClock) *Reviewer {
	return NewReviewer(Options{Client: s.client(), Self: storage.Self{PodName: "game-0", PodNamespace: "games"},
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
			user, err := r.Authorize(context.Background(), tt.token, tt.a)
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
	_, err := r.Authorize(context.Background(), "operator-token", agent.Access{Verb: "update", Plugin: "hot_update"})
	require.NoError(t, err)
	require.Len(t, s.reviews, 2)
	assert.Equal(t, authenticationv1.TokenReviewSpec{Token: "operator-token", Audiences: []string{"sidecar-agent"}}, s.reviews[0].(*authenticationv1.TokenReview).Spec)
	sar := s.reviews[1].(*authzv1.LocalSubjectAccessReview)
	assert.Equal(t, "games", sar.Namespace)
	assert.Equal(t, authzv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: "games", Verb: "update", Group: "sidecarops.io",
			Resource: "sidecaragents", Subresource: "hot_update", Name: "game-0"},
		User: "system:serviceaccount:ops:operator", UID: "u-1", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ops"},
		Extra: map[string]authzv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"operator-0"}},
	}, sar.Spec)
}

// Answers are kept for a while (allowed longer than refused), so a busy caller costs the API server
// a review a minute; an API server that does not answer refuses the request and is asked again.
func TestCache(t *testing.T) {
	s := newAPIServer()
	clock := clocktesting.NewFakeClock(time.Now())
	r := reviewer(s, clock)
	ctx := context.Background()
	update := agent.Access{Verb: "update", Plugin: "hot_update"}

	for range 3 {
		_, err := r.Authorize(ctx, "operator-token", update)
		require.NoError(t, err)
		_, err = r.Authorize(ctx, "made-up", update)
		require.ErrorIs(t, err, agent.ErrUnauthenticated)
		_, err = r.Authorize(ctx, "viewer-token", update)
		require.ErrorIs(t, err, agent.ErrForbidden)
	}
	assert.Equal(t, 5, s.count(), "2 reviews for the operator, 1 for the made-up token, 2 for the viewer")

	clock.Step(deniedTTL + time.Second)
	_, err := r.Authorize(ctx, "operator-token", update)
	require.NoError(t, err)
	_, err = r.Authorize(ctx, "made-up", update)
	require.ErrorIs(t, err, agent.ErrUnauthenticated)
	_, err = r.Authorize(ctx, "viewer-token", update)
	require.ErrorIs(t, err, agent.ErrForbidden)
	assert.Equal(t, 7, s.count(), "the refusals are asked again; the viewer's token is still known, its access is not")

	clock.Step(allowedTTL)
	s.mu.Lock()
	s.down = true
	s.mu.Unlock()
	for range 2 {
		_, err = r.Authorize(ctx, "operator-token", update)
		require.Error(t, err)
		assert.False(t, errors.Is(err, agent.ErrUnauthenticated) || errors.Is(err, agent.ErrForbidden), "no answer is not a refusal: %v", err)
		assert.ErrorContains(t, err, "TokenReview: connection refused")
	}
	assert.Equal(t, 9, s.count(), "failures are not cached")

	// Made-up tokens cannot grow the cache past its bound.
	s.mu.Lock()
	s.down = false
	s.mu.Unlock()
	for i := range 2 * cacheSize {
		_, _ = r.Authorize(ctx, fmt.Sprintf("made-up-%d", i), update)
	}
	assert.LessOrEqual(t, len(r.tokens.Keys()), cacheSize)
}
