// Package auth decides who may use the sidecar agent's API (docs/agent.md §8): it asks the API server
// who a caller's bearer token belongs to (a TokenReview, for the audiences the agent is configured
// with) and whether that user may have the access the request asks for (a LocalSubjectAccessReview in
// the agent's namespace, on a resource the administrator chooses, named after the agent's pod). The
// asking and the bounded caches of answers are internal/kubeauth's, which the manager's metrics
// share; this package says what the agent asks.
//
// It implements agent.Authorizer; it must not serve HTTP (package agent does) nor write anything to
// the API server (agent/storage does): reviews are questions, and the only API calls it makes.
package auth
