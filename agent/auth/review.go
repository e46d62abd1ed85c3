package auth

import (
	"context"

	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/storage"
	"github.com/sidecarops/sidecarops/internal/kubeauth"
)

// Options configure a Reviewer.
type Options struct {
	// Client asks the API server: create TokenReviews (cluster-wide) and LocalSubjectAccessReviews
	// (in Self's namespace). Give it a client of its own, made with kubeauth.ClientConfig: made-up
	// tokens sent to the agent then cannot starve the agent's writes of results.
	Client kubernetes.Interface
	// Self is the pod the agent runs in: the namespace and the name of the resource reviewed.
	Self storage.Self
	// Audiences the caller's token must be issued for. Empty: the API server's own, which lets the
	// agent replay the tokens it is sent against the API server, so set one.
	Audiences []string
	// Resource is what callers are authorised on, e.g. sidecaragents.sidecarops.io: verb get (GET
	// /status, /metrics) or get/update of subresource PLUGIN (requests to /plugins/PLUGIN/).
	Resource schema.GroupResource
	// Limits bound the reviews asked; kubeauth.DefaultLimits when zero.
	Limits kubeauth.Limits
	// Clock is time for the caches and the limits; the real one when nil.
	Clock clock.PassiveClock
}

// Reviewer is an agent.Authorizer asking the API server (internal/kubeauth). Safe for concurrent use.
type Reviewer struct {
	o      Options
	review *kubeauth.Reviewer
}

// NewReviewer makes a Reviewer.
func NewReviewer(o Options) *Reviewer {
	return &Reviewer{o: o, review: kubeauth.NewReviewer(kubeauth.Options{Client: o.Client, Audiences: o.Audiences, Limits: o.Limits, Clock: o.Clock})}
}

// Authorize implements agent.Authorizer: a is access to the resource named after the agent's pod,
// in its namespace, a plugin's requests to the subresource named after the plugin.
func (r *Reviewer) Authorize(ctx context.Context, c agent.Credentials, a agent.Access) (string, error) {
	return r.review.Review(ctx, c, kubeauth.Attributes{Resource: &authzv1.ResourceAttributes{
		Namespace: r.o.Self.PodNamespace, Verb: a.Verb, Group: r.o.Resource.Group,
		Resource: r.o.Resource.Resource, Subresource: a.Plugin, Name: r.o.Self.PodName,
	}})
}
