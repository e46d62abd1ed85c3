package auth

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/storage"
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
		Audiences: map[string][]string{"operator-token": {"sidecar-agent"}, "api-audience-token": {"https://kubernetes.default.svc"},
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
