package kubeauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"
)

const (
	// A token or a permission taken away takes at most allowedTTL to take effect; kubelet, another
	// authoriser of API callers, keeps answers minutes.
	allowedTTL = time.Minute
	// Refusals are kept shorter, so a caller just granted access waits little, and long enough that
	// a caller repeating a bad token costs the API server one review per deniedTTL.
	deniedTTL = 10 * time.Second
	// cacheSize bounds each cache: a flood of made-up tokens evicts refusals (costing reviews, which
	// Limits bound), it cannot grow memory.
	cacheSize = 1024
	// reviewTimeout bounds one review, so a slow API server does not hold requests indefinitely.
	reviewTimeout = 10 * time.Second
	// An allowed answer asked for within refreshAhead of its expiry is asked again in the
	// background, so a caller asking at least that often never waits for a review again.
	refreshAhead = allowedTTL / 4
	// A token and access the API server allowed stay known (their re-reviews spend Limits.Known)
	// for knownTTL after their last allowed request: a projected ServiceAccount token's default
	// lifetime, so a caller coming back with the same token is known.
	knownTTL = time.Hour
)

var (
	// ErrUnauthenticated is a token the API server does not accept (HTTP 401).
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden is an authenticated user without the access asked for (HTTP 403).
	ErrForbidden = errors.New("forbidden")
)

// Client is what a Reviewer asks the API server with; a kubernetes.Interface is one.
type Client interface {
	AuthenticationV1() authenticationv1client.AuthenticationV1Interface
	AuthorizationV1() authorizationv1client.AuthorizationV1Interface
}

// Clients is a Client of its two API groups' clients alone, for a process without a clientset.
type Clients struct {
	Authentication authenticationv1client.AuthenticationV1Interface
	Authorization  authorizationv1client.AuthorizationV1Interface
}

// AuthenticationV1 implements Client.
func (c Clients) AuthenticationV1() authenticationv1client.AuthenticationV1Interface {
	return c.Authentication
}

// AuthorizationV1 implements Client.
func (c Clients) AuthorizationV1() authorizationv1client.AuthorizationV1Interface {
	return c.Authorization
}

// Options configure a Reviewer.
type Options struct {
	// Client creates TokenReviews, and SubjectAccessReviews or LocalSubjectAccessReviews (in the
	// namespaces of the resources asked about). Give it a client of its own, made with ClientConfig:
	// Limits bound its calls, so made-up tokens cannot starve the process's other API calls, and
	// no limiter of client-go's queues the reviews Limits admitted.
	Client Client
	// Audiences the caller's token must be issued for. Empty: the API server's own (a token the
	// caller could also use against the API server).
	Audiences []string
	// Limits bound the reviews asked; DefaultLimits when zero, else each rate and burst positive
	// (rate.Inf for no bound) but Reserved's and Known's, which may be zero.
	Limits Limits
	// Clock is time for the caches and the limits; the real one when nil.
	Clock clock.PassiveClock
}

// Credentials are what a request presents: its bearer token, and where it comes from.
type Credentials struct {
	Token string
	// Source is whose allowance of reviews a new token spends (Limits.PerSource), and whose refusals
	// keep it from the reserve: the address the request came from.
	Source string
}

// FromRequest are a request's credentials: the token of its "Authorization: Bearer TOKEN" header
// (the scheme is case-insensitive, RFC 6750; "" without one) and its remote IP address.
func FromRequest(r *http.Request) Credentials {
	c := Credentials{Source: r.RemoteAddr}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		c.Source = host
	}
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		c.Token = strings.TrimSpace(token)
	}
	return c
}

// Attributes are what a request asks for: exactly one of the two is set.
type Attributes struct {
	// Resource is asked with a LocalSubjectAccessReview in its namespace.
	Resource *authzv1.ResourceAttributes
	// NonResource (a path and a verb) is asked with a cluster SubjectAccessReview.
	NonResource *authzv1.NonResourceAttributes
}

// String says what a refusal refused.
func (a Attributes) String() string {
	if r := a.Resource; r != nil {
		what := r.Resource
		if r.Group != "" {
			what += "." + r.Group
		}
		if r.Subresource != "" {
			what += "/" + r.Subresource
		}
		return fmt.Sprintf("%s %s %q in namespace %s", r.Verb, what, r.Name, r.Namespace)
	}
	if n := a.NonResource; n != nil {
		return fmt.Sprintf("%s %s", n.Verb, n.Path)
	}
	return "nothing"
}

// Reviewer asks the API server and keeps its answers. Safe for concurrent use.
type Reviewer struct {
	o      Options
	tokens answers // token hash → verdict
	access answers // token hash, attributes → verdict
	// known are the keys of tokens and accesses the API server allowed (token hash, and token hash
	// and attributes) → struct{}.
	known  *cache.LRUExpireCache
	limits *limiter
	// flights asks one review per key at a time, whatever the number of requests waiting for it.
	// They are keyed as the answers: never by a token, so a memory dump of the process does not
	// hand out its callers' tokens.
	flights singleflight.Group
}

// verdict is an answer of the API server: who a token belongs to (a TokenReview's answer), and
// whether the review refused (refusal; nil: allowed), kept until expires.
type verdict struct {
	user    authenticationv1.UserInfo
	refusal error
	expires time.Time
}

// answers keep allowed answers and refusals in caches of their own, so that refusals, which
// anyone can have by making tokens up, never evict an allowed answer.
type answers struct {
	clock           clock.PassiveClock
	allowed, denied *cache.LRUExpireCache
}

func newAnswers(c clock.PassiveClock) answers {
	return answers{clock: c, allowed: cache.NewLRUExpireCacheWithClock(cacheSize, c), denied: cache.NewLRUExpireCacheWithClock(cacheSize, c)}
}

func (a answers) get(key string) (verdict, bool) {
	v, ok := a.allowed.Get(key)
	if !ok {
		v, ok = a.denied.Get(key)
	}
	if !ok {
		return verdict{}, false
	}
	return v.(verdict), true
}

// add keeps v, allowed longer than refused.
func (a answers) add(key string, v verdict) {
	if v.refusal != nil {
		v.expires = a.clock.Now().Add(deniedTTL)
		a.allowed.Remove(key)
		a.denied.Add(key, v, deniedTTL)
		return
	}
	v.expires = a.clock.Now().Add(allowedTTL)
	a.denied.Remove(key)
	a.allowed.Add(key, v, allowedTTL)
}

// NewReviewer makes a Reviewer.
func NewReviewer(o Options) *Reviewer {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Limits == (Limits{}) {
		o.Limits = DefaultLimits
	}
	return &Reviewer{o: o, tokens: newAnswers(o.Clock), access: newAnswers(o.Clock),
		known: cache.NewLRUExpireCacheWithClock(cacheSize, o.Clock), limits: newLimiter(o.Limits, o.Clock)}
}

// Review says who c.Token belongs to and whether they may have a. The error wraps
// ErrUnauthenticated when the token is not accepted, ErrForbidden when its user (then returned
// too) may not have a, ErrThrottled (a *Throttled) when an answer not yet known would have cost
// c.Source, or all sources together, more reviews than Limits allow; any other error means no answer
// could be had (the API server is unreachable, or this process may not ask it), and nothing is
// allowed.
//
// A token is never refused for its shape, e.g. for not being a JWT: the API server's
// authenticators accept more than service account and OIDC tokens (bootstrap tokens, a static
// token file, a webhook authenticator with tokens of its own, which may honour any audience), so
// only a review can tell. Limits make up for it: a made-up token costs a review of its source's
// allowance, and once refused, its source may spend only what all sources share.
func (r *Reviewer) Review(ctx context.Context, c Credentials, a Attributes) (string, error) {
	if (a.Resource == nil) == (a.NonResource == nil) {
		return "", errors.New("kubeauth: a review asks about a resource or a non-resource path, exactly one")
	}
	if c.Token == "" {
		return "", fmt.Errorf("%w: a bearer token is required", ErrUnauthenticated)
	}
	// Only a hash is kept: a memory dump of the process does not hand out its callers' tokens.
	sum := sha256.Sum256([]byte(c.Token))
	key := hex.EncodeToString(sum[:])
	who, err := r.answer(ctx, r.tokens, key, c.Source, func(ctx context.Context) (verdict, error) { return r.authenticate(ctx, c.Token) })
	if err == nil {
		err = who.refusal
	}
	if err != nil {
		r.refused(c.Source, err)
		return "", err
	}
	akey := accessKey(key, a)
	may, err := r.answer(ctx, r.access, akey, c.Source, func(ctx context.Context) (verdict, error) { return r.authorize(ctx, who.user, a) })
	if err == nil {
		err = may.refusal
	}
	if err == nil {
		r.known.Add(key, struct{}{}, knownTTL)
		r.known.Add(akey, struct{}{}, knownTTL)
	}
	r.refused(c.Source, err)
	return who.user.Username, err
}

// refused notes the source of a request that err refused.
func (r *Reviewer) refused(source string, err error) {
	if errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrForbidden) {
		r.limits.refusedFrom(source)
	}
}

// answer is the verdict kept under key in cache or else review's, asked at most once at a time for all
// the requests wanting it (the review spends the allowance of the first one's source). An allowed
// answer close to expiry is asked again in the background.
func (r *Reviewer) answer(ctx context.Context, cache answers, key, source string, review func(context.Context) (verdict, error)) (verdict, error) {
	if v, ok := cache.get(key); ok {
		if v.refusal == nil && r.isKnown(key) && !r.o.Clock.Now().Before(v.expires.Add(-refreshAhead)) {
			r.flights.DoChan(key, func() (any, error) { return r.ask(ctx, cache, key, source, true, review) })
		}
		return v, nil
	}
	flight := r.flights.DoChan(key, func() (any, error) { return r.ask(ctx, cache, key, source, false, review) })
	select {
	case res := <-flight:
		if res.Err != nil {
			return verdict{}, res.Err
		}
		return res.Val.(verdict), nil
	case <-ctx.Done():
		return verdict{}, ctx.Err()
	}
}

// ask reviews key, unless its answer is kept and not being refreshed, and keeps the answer. The
// review outlives the request that began it, which others may be waiting for, up to reviewTimeout.
func (r *Reviewer) ask(ctx context.Context, cache answers, key, source string, refresh bool, review func(context.Context) (verdict, error)) (verdict, error) {
	// A flight begun as another ended finds its answer.
	if v, ok := cache.get(key); ok && !refresh {
		return v, nil
	}
	done, err := r.limits.admit(source, r.isKnown(key))
	if err != nil {
		return verdict{}, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
	defer cancel()
	v, err := review(ctx)
	if err != nil {
		// Not kept: the next request asks again.
		return verdict{}, err
	}
	if v.refusal != nil {
		r.known.Remove(key)
	}
	cache.add(key, v)
	return v, nil
}

func (r *Reviewer) isKnown(key string) bool {
	_, ok := r.known.Get(key)
	return ok
}

func (r *Reviewer) authenticate(ctx context.Context, token string) (verdict, error) {
	tr, err := r.o.Client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: r.o.Audiences}}, metav1.CreateOptions{})
	if err != nil {
		return verdict{}, fmt.Errorf("TokenReview: %w", err)
	}
	v := verdict{user: tr.Status.User}
	switch {
	case !tr.Status.Authenticated:
		v.refusal = fmt.Errorf("%w: the API server did not authenticate the token %s", ErrUnauthenticated, tr.Status.Error)
	case len(r.o.Audiences) > 0 && !slices.ContainsFunc(tr.Status.Audiences, func(aud string) bool { return slices.Contains(r.o.Audiences, aud) }):
		// The API server answers with the audiences it checked; one of ours must be among them.
		v.refusal = fmt.Errorf("%w: token not issued for audience %v", ErrUnauthenticated, r.o.Audiences)
	case tr.Status.User.Username == "":
		v.refusal = fmt.Errorf("%w: token has no user name", ErrUnauthenticated)
	}
	return v, nil
}

// accessKey is the key of the answer about a for the token whose key is key.
func accessKey(key string, a Attributes) string {
	if res := a.Resource; res != nil {
		return key + "\x00r\x00" + strings.Join([]string{res.Namespace, res.Verb, res.Group, res.Version, res.Resource, res.Subresource, res.Name}, "\x00")
	}
	return key + "\x00n\x00" + a.NonResource.Verb + "\x00" + a.NonResource.Path
}

func (r *Reviewer) authorize(ctx context.Context, user authenticationv1.UserInfo, a Attributes) (verdict, error) {
	spec := authzv1.SubjectAccessReviewSpec{User: user.Username, Groups: user.Groups, UID: user.UID,
		Extra: make(map[string]authzv1.ExtraValue, len(user.Extra))}
	for k, v := range user.Extra {
		spec.Extra[k] = authzv1.ExtraValue(v)
	}
	var status authzv1.SubjectAccessReviewStatus
	if a.Resource != nil {
		spec.ResourceAttributes = a.Resource
		ns := a.Resource.Namespace
		sar, err := r.o.Client.AuthorizationV1().LocalSubjectAccessReviews(ns).Create(ctx,
			&authzv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return verdict{}, fmt.Errorf("LocalSubjectAccessReview: %w", err)
		}
		status = sar.Status
	} else {
		spec.NonResourceAttributes = a.NonResource
		sar, err := r.o.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return verdict{}, fmt.Errorf("SubjectAccessReview: %w", err)
		}
		status = sar.Status
	}
	var v verdict
	if !status.Allowed || status.Denied {
		v.refusal = fmt.Errorf("%w: user %q may not %s", ErrForbidden, user.Username, a)
		if reason := strings.TrimSpace(status.Reason + " " + status.EvaluationError); reason != "" {
			v.refusal = fmt.Errorf("%w (%s)", v.refusal, reason)
		}
	}
	return v, nil
}
