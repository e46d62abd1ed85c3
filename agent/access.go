package agent

import (
	"context"

	"github.com/sidecarops/sidecarops/internal/kubeauth"
)

// Access is what a request to the agent's API asks for. An Authorizer turns it into the resource
// attributes of a SubjectAccessReview (docs/agent.md §8).
type Access struct {
	// Verb is "get" for GET and HEAD, "update" for every other method.
	Verb string
	// Plugin is NAME of a /plugins/NAME/ request; empty for /status and /metrics.
	Plugin string
}

// Authorizer says who sent a request to the agent's API and whether they may have the access it asks
// for. c are the request's bearer token, never empty, and its remote address.
//
// The error wraps ErrUnauthenticated when the token is not accepted, ErrForbidden when its user (then
// returned too) may not have a, ErrThrottled (a *kubeauth.Throttled) when the answer would have cost
// more reviews than c's source, or all sources together, may have; any other error means no answer
// could be had (the API server is unreachable, the agent may not ask it), and nothing is allowed.
type Authorizer interface {
	Authorize(ctx context.Context, c Credentials, a Access) (user string, err error)
}

// Credentials are what a request presents: its bearer token and its remote address.
type Credentials = kubeauth.Credentials

var (
	// ErrUnauthenticated answers 401: no token, or one the API server does not accept.
	ErrUnauthenticated = kubeauth.ErrUnauthenticated
	// ErrForbidden answers 403: an authenticated user without the access asked for.
	ErrForbidden = kubeauth.ErrForbidden
	// ErrThrottled answers 429: a new token, while its source (or everyone) has had too many reviewed.
	ErrThrottled = kubeauth.ErrThrottled
)

type callerKey struct{}

// WithCaller is ctx carrying the authenticated user name of the API request it belongs to; the
// Server sets it on every request it lets through to a plugin.
func WithCaller(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, callerKey{}, user)
}

// Caller is the authenticated user of the API request ctx belongs to, "" outside one. Plugins that act
// on a request's behalf record it, and refuse to act when it is empty.
func Caller(ctx context.Context) string {
	user, _ := ctx.Value(callerKey{}).(string)
	return user
}
