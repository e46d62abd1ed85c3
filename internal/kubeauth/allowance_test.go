package kubeauth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecarops/sidecarops/internal/testing/reviewserver"
)

// Issue 35: the allowance of reviews was one for every caller. Made-up tokens from a handful of
// addresses spent it, and then every fresh valid token from another address was answered 429, and
// a known caller too once its answer expired; twenty concurrent first requests with one new token
// each asked a TokenReview of their own, and were all answered 429 under a flood. Now a flood's
// addresses, once refused, spend only the global allowance, callers elsewhere the reserve, known
// callers the known allowance (and their answers are refreshed before they expire), and one review
// answers every request waiting for it.
func TestServedUnderFlood(t *testing.T) {
	const passes = 150 // a second each: longer than an allowed answer is kept
	// The flood: three made-up tokens from each address every second, IPv4 addresses and IPv6 /64s.
	var flooders []string
	for i := range 10 {
		flooders = append(flooders, fmt.Sprintf("198.51.100.%d", i+1))
	}
	for i := range 4 {
		flooders = append(flooders, fmt.Sprintf("2001:db8:%x::1", i+1))
	}
	type caller struct {
		source string
		every  int // passes between its requests; each is allowed
		// fresh: a new valid token each time; else the same token, asked once before the flood.
		fresh bool
		// at once: concurrent requests with the same token, which one TokenReview answers.
		atOnce int
	}
	tests := []struct {
		name    string
		callers []caller
	}{
		{"fresh valid tokens from another address", []caller{{source: "203.0.113.7", every: 2, fresh: true, atOnce: 1}}},
		{"fresh valid tokens from another IPv6 /64", []caller{{source: "2001:db8:ff::7", every: 2, fresh: true, atOnce: 1}}},
		{"twenty concurrent first requests with one new token", []caller{{source: "203.0.113.9", every: 10, fresh: true, atOnce: 20}}},
		{"known callers across the expiry of their answers, at a flooding address", []caller{
			{source: flooders[0], every: 25, atOnce: 1}, // refreshed ahead of expiry
			{source: flooders[1], every: 70, atOnce: 1}, // expired each time
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newAPIServer()
				tokenOf := func(c, pass int) string {
					if tt.callers[c].fresh {
						return fmt.Sprintf("fresh-%d-%d", c, pass)
					}
					return fmt.Sprintf("known-%d", c)
				}
				for c := range tt.callers {
					for pass := range passes {
						s.Tokens[tokenOf(c, pass)] = s.Tokens["prometheus-token"]
						s.Audiences[tokenOf(c, pass)] = s.Audiences["prometheus-token"]
					}
				}
				client := &gatedClient{Client: s.Client(), gates: map[string]chan struct{}{}}
				clock := clocktesting.NewFakeClock(time.Now())
				start := clock.Now()
				r := NewReviewer(Options{Client: client, Clock: clock})
				ctx := context.Background()

				ask := func(c, pass int) {
					cl := tt.callers[c]
					token := tokenOf(c, pass)
					// The concurrent requests all wait for the first one's TokenReview.
					gate := make(chan struct{})
					client.gate(token, gate)
					errs := make([]error, cl.atOnce)
					var wg sync.WaitGroup
					for i := range cl.atOnce {
						wg.Go(func() {
							_, errs[i] = r.Review(ctx, Credentials{Token: token, Source: cl.source}, getMetrics)
						})
					}
					synctest.Wait()
					close(gate)
					wg.Wait()
					for i, err := range errs {
						assert.NoError(t, err, "%s at %v, request %d of %d", token, clock.Since(start), i+1, cl.atOnce)
					}
					if cl.fresh {
						assert.Equal(t, 1, tokenReviews(s, token), "TokenReviews of %s", token)
					}
				}
				for pass := range passes {
					if pass > 0 {
						for i := range 3 {
							for f, source := range flooders {
								_, err := r.Review(ctx, Credentials{Token: fmt.Sprintf("made-up-%d-%d-%d", pass, f, i), Source: source}, getMetrics)
								if !errors.Is(err, ErrUnauthenticated) {
									require.ErrorIs(t, err, ErrThrottled)
								}
							}
						}
					}
					for c, cl := range tt.callers {
						if pass%cl.every == 0 {
							ask(c, pass)
						}
					}
					// Background refreshes end before time goes on.
					synctest.Wait()
					clock.Step(time.Second)
				}

				elapsed := clock.Since(start).Seconds()
				l := DefaultLimits
				bound := float64(l.GlobalBurst+l.ReservedBurst+l.KnownBurst) + float64(l.Global+l.Reserved+l.Known)*elapsed
				assert.LessOrEqual(t, float64(len(s.Reviews())), bound, "reviews in %vs", elapsed)
			})
		})
	}
}

// tokenReviews are the TokenReviews s was asked of token.
func tokenReviews(s *reviewserver.Server, token string) int {
	n := 0
	for _, review := range s.Reviews() {
		if tr, ok := review.(*authenticationv1.TokenReview); ok && tr.Spec.Token == token {
			n++
		}
	}
	return n
}

// gatedClient holds the TokenReviews of a token until its gate is closed, outside the fake
// clientset's lock, so that the requests waiting for them are seen waiting (synctest.Wait).
type gatedClient struct {
	Client
	mu    sync.Mutex
	gates map[string]chan struct{}
}

func (c *gatedClient) gate(token string, gate chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gates[token] = gate
}

func (c *gatedClient) AuthenticationV1() authenticationv1client.AuthenticationV1Interface {
	return gatedAuthentication{c.Client.AuthenticationV1(), c}
}

type gatedAuthentication struct {
	authenticationv1client.AuthenticationV1Interface
	c *gatedClient
}

func (a gatedAuthentication) TokenReviews() authenticationv1client.TokenReviewInterface {
	return gatedTokenReviews{a.AuthenticationV1Interface.TokenReviews(), a.c}
}

type gatedTokenReviews struct {
	authenticationv1client.TokenReviewInterface
	c *gatedClient
}

func (g gatedTokenReviews) Create(ctx context.Context, tr *authenticationv1.TokenReview, o metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	g.c.mu.Lock()
	gate := g.c.gates[tr.Spec.Token]
	g.c.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.TokenReviewInterface.Create(ctx, tr, o)
}

// An allowed answer asked for in the last quarter of its life is asked again in the background: the
// caller is answered at once from the kept answer, which the new one replaces, so a caller asking
// often never waits for a review nor loses its answer while the API server is briefly away, and a
// token revoked meanwhile is refused as soon as the refresh says so.
func TestRefreshAhead(t *testing.T) {
	type step struct {
		at      time.Duration // since the first request
		change  func(*reviewserver.Server)
		err     string // in the request's error; "": allowed
		reviews int    // asked so far, the background ones included
	}
	down := func(s *reviewserver.Server) { s.SetDown(true) }
	tests := []struct {
		name  string
		steps []step
	}{
		{"asked for before the last quarter: not refreshed", []step{
			{reviews: 2},
			{at: allowedTTL - refreshAhead - time.Second, reviews: 2},
			{at: allowedTTL + time.Second, reviews: 4}, // expired: asked again, the caller waiting
		}},
		{"asked for in the last quarter: refreshed, and kept past the first answer's expiry", []step{
			{reviews: 2},
			{at: allowedTTL - refreshAhead, reviews: 4},
			{at: 2*allowedTTL - refreshAhead - time.Second, change: down, reviews: 6},
			{at: 2*allowedTTL - refreshAhead + time.Second, err: "TokenReview: connection refused", reviews: 7},
		}},
		{"a refresh that refuses cuts the caller off at once", []step{
			{reviews: 2},
			{at: allowedTTL - refreshAhead, change: func(s *reviewserver.Server) { delete(s.Tokens, "prometheus-token") }, reviews: 4},
			{at: allowedTTL - refreshAhead + time.Second, err: "did not authenticate the token", reviews: 4},
		}},
		{"a refusal is not refreshed", []step{
			{change: func(s *reviewserver.Server) { delete(s.Tokens, "prometheus-token") }, err: "did not authenticate", reviews: 1},
			{at: deniedTTL - time.Second, err: "did not authenticate", reviews: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newAPIServer()
				clock := clocktesting.NewFakeClock(time.Now())
				start := clock.Now()
				r := NewReviewer(Options{Client: s.Client(), Clock: clock})
				for i, st := range tt.steps {
					clock.SetTime(start.Add(st.at))
					if st.change != nil {
						st.change(s)
					}
					_, err := r.Review(context.Background(), as("prometheus-token"), getMetrics)
					synctest.Wait()
					if st.err == "" {
						require.NoError(t, err, "step %d", i)
					} else {
						require.ErrorContains(t, err, st.err, "step %d", i)
					}
					assert.Len(t, s.Reviews(), st.reviews, "step %d", i)
				}
			})
		})
	}
}
