package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/storage"
)

const (
	// A token or a permission taken away takes at most allowedTTL to take effect; kubelet, the other
	// in-pod authoriser of API callers, keeps answers minutes.
	allowedTTL = time.Minute
	// Refusals are kept shorter, so a caller just granted access waits little, and long enough that
	// a caller repeating a bad token costs the API server one review per deniedTTL.
	deniedTTL = 10 * time.Second
	// cacheSize bounds each cache: a flood of made-up tokens evicts entries (costing reviews), it
	// cannot grow memory.
	cacheSize = 1024
	// reviewTimeout bounds one review, so a slow API server does not hold requests indefinitely.
	reviewTimeout = 10 * time.Second
)

// Options configure a Reviewer.
type Options struct {
	// Client asks the API server: create TokenReviews (cluster-wide) and LocalSubjectAccessReviews
	// (in Self's namespace). Give it a client of its own, with its own rate limiter: made-up tokens
	// sent to the agent then cannot starve the agent's writes of results.
	Client kubernetes.Interface
	// Self is the pod the agent runs in: the namespace and the name of the resource reviewed.
	Self storage.Self
	// Audiences the caller's token must be issued for. Empty: the API server's own, which lets the
	// agent replay the tokens it is sent against the API server, so set one.
	Audiences []string
	// Resource is what callers are authorised on, e.g. sidecaragents.sidecarops.io: verb get (GET
	// /status, /metrics) or get/update of subresource PLUGIN (requests to /plugins/PLUGIN/).
	Resource schema.GroupResource
	// Clock is time for the caches; the real one when nil.
	Clock cache.Clock
}

// Reviewer is an agent.Authorizer asking the API server. Safe for concurrent use.
type Reviewer struct {
	o      Options
	tokens *cache.LRUExpireCache // token hash → authentication
	access *cache.LRUExpireCache // token hash, verb, plugin → error (nil: allowed)
}

type authentication struct {
	user authenticationv1.UserInfo
	err  error
}

// NewReviewer makes a Reviewer.
func NewReviewer(o Options) *Reviewer {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Reviewer{o: o, tokens: cache.NewLRUExpireCacheWithClock(cacheSize, o.Clock), access: cache.NewLRUExpireCacheWithClock(cacheSize, o.Clock)}
}

// Authorize implements agent.Authorizer.
func (r *Reviewer) Authorize(ctx context.Context, token string, a agent.Access) (string, error) {
	// Only a hash is kept: a memory dump of the agent does not hand out its callers' tokens.
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	user, err := r.authenticate(ctx, key, token)
	if err != nil {
		return "", err
	}
	return user.Username, r.authorize(ctx, key, user, a)
}

func (r *Reviewer) authenticate(ctx context.Context, key, token string) (authenticationv1.UserInfo, error) {
	if v, ok := r.tokens.Get(key); ok {
		a := v.(authentication)
		return a.user, a.err
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	tr, err := r.o.Client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: r.o.Audiences}}, metav1.CreateOptions{})
	if err != nil {
		// Not cached: the next request asks again.
		return authenticationv1.UserInfo{}, fmt.Errorf("TokenReview: %w", err)
	}
	a := authentication{user: tr.Status.User}
	switch {
	case !tr.Status.Authenticated:
		a.err = fmt.Errorf("%w: the API server did not authenticate the token %s", agent.ErrUnauthenticated, tr.Status.Error)
	case len(r.o.Audiences) > 0 && !slices.ContainsFunc(tr.Status.Audiences, func(aud string) bool { return slices.Contains(r.o.Audiences, aud) }):
		// The API server answers with the audiences it checked; one of ours must be among them.
		a.err = fmt.Errorf("%w: token not issued for audience %v", agent.ErrUnauthenticated, r.o.Audiences)
	case tr.Status.User.Username == "":
		a.err = fmt.Errorf("%w: token has no user name", agent.ErrUnauthenticated)
	}
	r.tokens.Add(key, a, ttl(a.err))
	return a.user, a.err
}

func (r *Reviewer) authorize(ctx context.Context, key string, user authenticationv1.UserInfo, a agent.Access) error {
	akey := key + "\x00" + a.Verb + "\x00" + a.Plugin
	if v, ok := r.access.Get(akey); ok {
		err, _ := v.(error)
		return err
	}
	ns, name := r.o.Self.PodNamespace, r.o.Self.PodName
	extra := make(map[string]authzv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	sar, err := r.o.Client.AuthorizationV1().LocalSubjectAccessReviews(ns).Create(ctx, &authzv1.LocalSubjectAccessReview{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns},
		Spec: authzv1.SubjectAccessReviewSpec{
			ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: a.Verb, Group: r.o.Resource.Group,
				Resource: r.o.Resource.Resource, Subresource: a.Plugin, Name: name},
			User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("LocalSubjectAccessReview: %w", err)
	}
	var denied error
	if !sar.Status.Allowed || sar.Status.Denied {
		what := r.o.Resource.String()
		if a.Plugin != "" {
			what += "/" + a.Plugin
		}
		denied = fmt.Errorf("%w: user %q may not %s %s %q in namespace %s", agent.ErrForbidden, user.Username, a.Verb, what, name, ns)
		if reason := strings.TrimSpace(sar.Status.Reason + " " + sar.Status.EvaluationError); reason != "" {
			denied = fmt.Errorf("%w (%s)", denied, reason)
		}
	}
	r.access.Add(akey, denied, ttl(denied))
	return denied
}

func ttl(err error) time.Duration {
	if err != nil {
		return deniedTTL
	}
	return allowedTTL
}
