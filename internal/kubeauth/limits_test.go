package kubeauth

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecarops/sidecarops/internal/testing/reviewserver"
)

// New tokens spend their source's allowance and the global one, and are refused at once, saying
// when to retry, once either is spent; answers already kept spend nothing.
func TestLimits(t *testing.T) {
	type step struct {
		after         time.Duration // on the clock, before the request
		source, token string
		err           error         // nil: allowed
		reason        string        // of a Throttled
		retry         time.Duration // of a Throttled
	}
	tests := []struct {
		name    string
		limits  Limits
		steps   []step
		reviews int // asked of the API server in all
	}{
		{
			name:   "a flood from one source spends its own allowance",
			limits: Limits{PerSource: 1, PerSourceBurst: 3, Global: 2, GlobalBurst: 8},
			steps: []step{
				{source: "a", token: "made-up-1", err: ErrUnauthenticated},
				{source: "a", token: "made-up-2", err: ErrUnauthenticated},
				{source: "a", token: "made-up-3", err: ErrUnauthenticated},
				{source: "a", token: "made-up-4", err: ErrThrottled, reason: "source", retry: time.Second},
				// A new caller elsewhere has its two reviews (who, and may they).
				{source: "b", token: "prometheus-token"},
				// What is known is answered, whatever its source has spent.
				{source: "a", token: "made-up-1", err: ErrUnauthenticated},
				{source: "a", token: "prometheus-token"},
				{after: time.Second, source: "a", token: "made-up-4", err: ErrUnauthenticated},
				{source: "a", token: "made-up-5", err: ErrThrottled, reason: "source", retry: time.Second},
			},
			reviews: 6,
		},
		{
			name:   "a flood from many sources spends the global allowance",
			limits: Limits{PerSource: 1, PerSourceBurst: 2, Global: 2, GlobalBurst: 4},
			steps: []step{
				{source: "a", token: "made-up-1", err: ErrUnauthenticated},
				{source: "a", token: "made-up-2", err: ErrUnauthenticated},
				{source: "b", token: "made-up-3", err: ErrUnauthenticated},
				{source: "c", token: "made-up-4", err: ErrUnauthenticated},
				{source: "d", token: "prometheus-token", err: ErrThrottled, reason: "global", retry: time.Second / 2},
				{after: time.Second, source: "d", token: "prometheus-token"},
			},
			reviews: 6,
		},
		{
			name:   "a flood's addresses, once refused, leave the reserve to callers elsewhere",
			limits: Limits{PerSource: 1, PerSourceBurst: 3, Global: 1, GlobalBurst: 2, Reserved: 1, ReservedBurst: 2},
			steps: []step{
				{source: "a", token: "made-up-1", err: ErrUnauthenticated},
				{source: "b", token: "made-up-2", err: ErrUnauthenticated},
				{source: "a", token: "made-up-3", err: ErrThrottled, reason: "global", retry: time.Second},
				{source: "c", token: "prometheus-token"},
				{source: "d", token: "made-up-4", err: ErrThrottled, reason: "global", retry: time.Second},
				{after: time.Second, source: "a", token: "made-up-3", err: ErrUnauthenticated},
				{source: "d", token: "made-up-4", err: ErrUnauthenticated},
				{source: "d", token: "made-up-5", err: ErrThrottled, reason: "global", retry: time.Second},
			},
			reviews: 6,
		},
		{
			// Else one host would have an allowance per address it takes.
			name:   "IPv6 addresses in one /64 share one allowance, IPv4 addresses have one each",
			limits: Limits{PerSource: 1, PerSourceBurst: 2, Global: 100, GlobalBurst: 100},
			steps: []step{
				{source: "2001:db8:1:2::1", token: "made-up-1", err: ErrUnauthenticated},
				{source: "2001:db8:1:2:ffff:ffff:ffff:ffff", token: "made-up-2", err: ErrUnauthenticated},
				{source: "2001:db8:1:2::3", token: "made-up-3", err: ErrThrottled, reason: "source", retry: time.Second},
				{source: "2001:db8:1:3::1", token: "made-up-4", err: ErrUnauthenticated},
				{source: "192.0.2.1", token: "made-up-5", err: ErrUnauthenticated},
				{source: "::ffff:192.0.2.1", token: "made-up-6", err: ErrUnauthenticated},
				{source: "192.0.2.1", token: "made-up-7", err: ErrThrottled, reason: "source", retry: time.Second},
				{source: "192.0.2.2", token: "made-up-8", err: ErrUnauthenticated},
			},
			reviews: 6,
		},
		{
			// Else a source would pay for what it never had.
			name:   "refused by the global allowance, the source keeps its own",
			limits: Limits{PerSource: 0.1, PerSourceBurst: 1, Global: 1, GlobalBurst: 1},
			steps: []step{
				{source: "a", token: "made-up-1", err: ErrUnauthenticated},
				{source: "b", token: "made-up-2", err: ErrThrottled, reason: "global", retry: time.Second},
				{after: time.Second, source: "b", token: "made-up-2", err: ErrUnauthenticated},
			},
			reviews: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newAPIServer()
			clock := clocktesting.NewFakeClock(time.Now())
			r := NewReviewer(Options{Client: s.Client(), Clock: clock, Limits: tt.limits})
			for i, st := range tt.steps {
				clock.Step(st.after)
				_, err := r.Review(context.Background(), Credentials{Token: st.token, Source: st.source}, getMetrics)
				if st.err == nil {
					require.NoError(t, err, "step %d", i)
					continue
				}
				require.ErrorIs(t, err, st.err, "step %d", i)
				if st.reason != "" {
					var throttled *Throttled
					require.ErrorAs(t, err, &throttled)
					assert.Equal(t, &Throttled{Reason: st.reason, RetryAfter: st.retry}, throttled, "step %d", i)
				}
			}
			assert.Len(t, s.Reviews(), tt.reviews)
		})
	}
}

// A source spends the reserve one review at a time, and not at all once refused; the known allowance
// is spent before the others by re-reviews only.
func TestAdmit(t *testing.T) {
	type step struct {
		source string
		known  bool
		reason string // of a Throttled; "": admitted
		done   bool   // the review admitted ends at once
	}
	tests := []struct {
		name    string
		refused []string
		steps   []step
	}{
		{"one review of the reserve at a time", nil, []step{
			{source: "a"}, // the global allowance
			{source: "a"}, // the reserve, under way
			{source: "a", reason: "global"},
			{source: "b", done: true},
			{source: "b", reason: "global"}, // the reserve is spent
		}},
		{"a refused source does not spend the reserve", []string{"2001:db8::1"}, []step{
			{source: "a", done: true},
			{source: "2001:db8::2", reason: "global"},
			{source: "b", done: true},
		}},
		{"re-reviews spend the known allowance first", nil, []step{
			{source: "a", known: true},
			{source: "a", known: true},
			{source: "a", known: true, done: true}, // then the global allowance
			{source: "b", done: true},              // then the reserve
			{source: "c", done: true},
			{source: "a", known: true, reason: "global"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(Limits{PerSource: 10, PerSourceBurst: 10, Global: 1, GlobalBurst: 1, Reserved: 1, ReservedBurst: 2, Known: 1, KnownBurst: 2},
				clocktesting.NewFakeClock(time.Now()))
			for _, source := range tt.refused {
				l.refusedFrom(source)
			}
			for i, st := range tt.steps {
				done, err := l.admit(st.source, st.known)
				if st.reason != "" {
					var throttled *Throttled
					require.ErrorAs(t, err, &throttled, "step %d", i)
					assert.Equal(t, st.reason, throttled.Reason, "step %d", i)
					continue
				}
				require.NoError(t, err, "step %d", i)
				if st.done {
					done()
				}
			}
		})
	}
}

func TestSourceKey(t *testing.T) {
	for source, want := range map[string]string{
		"192.0.2.1":                   "192.0.2.1",
		"::ffff:192.0.2.1":            "192.0.2.1",
		"2001:db8:1:2::1":             "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1":        "2001:db8:1:2::/64",
		"fe80::1%eth0":                "fe80::/64",
		"@":                           "@",
		"not an address":              "not an address",
		"2001:0db8:0001:0002:0:0:0:1": "2001:db8:1:2::/64",
	} {
		assert.Equal(t, want, sourceKey(source), source)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", time.Millisecond: "1", time.Second: "1", 1500 * time.Millisecond: "2", time.Minute: "60"} {
		assert.Equal(t, want, (&Throttled{RetryAfter: d}).RetryAfterSeconds(), d)
	}
}

// Before, one cache held both: a cacheful of made-up tokens pushed every caller's allowed answer out, and
// each caller's next request cost reviews again (and waited behind the made-up ones for them).
func TestRefusalsKeepAllowedAnswers(t *testing.T) {
	s := newAPIServer()
	r := NewReviewer(Options{Client: s.Client(), Limits: unlimited})
	ctx := context.Background()
	_, err := r.Review(ctx, as("prometheus-token"), getMetrics)
	require.NoError(t, err)
	_, err = r.Review(ctx, as("viewer-token"), getMetrics)
	require.ErrorIs(t, err, ErrForbidden)
	for i := range 2 * cacheSize {
		_, err := r.Review(ctx, as(fmt.Sprintf("made-up-%d", i)), getMetrics)
		require.ErrorIs(t, err, ErrUnauthenticated)
	}
	asked := len(s.Reviews())
	_, err = r.Review(ctx, as("prometheus-token"), getMetrics)
	require.NoError(t, err)
	_, err = r.Review(ctx, as("viewer-token"), getMetrics)
	require.ErrorIs(t, err, ErrForbidden)
	assert.Equal(t, asked, len(s.Reviews()), "the callers' answers are still kept")
	_, err = r.Review(ctx, as("made-up-0"), getMetrics)
	require.ErrorIs(t, err, ErrUnauthenticated)
	assert.Equal(t, asked+1, len(s.Reviews()), "the first refusal was pushed out by the others")
}

// A revoked token, or a permission taken away, still lets its caller in until the allowed answer
// expires, and not a moment longer.
func TestRevocation(t *testing.T) {
	tests := []struct {
		name   string
		revoke func(*reviewserver.Server)
		err    error
	}{
		{"token revoked", func(s *reviewserver.Server) { delete(s.Tokens, "prometheus-token") }, ErrUnauthenticated},
		{"binding removed", func(s *reviewserver.Server) {
			s.Allow = func(string, authzv1.SubjectAccessReviewSpec) bool { return false }
		}, ErrForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newAPIServer()
			clock := clocktesting.NewFakeClock(time.Now())
			r := NewReviewer(Options{Client: s.Client(), Clock: clock})
			ctx := context.Background()
			_, err := r.Review(ctx, as("prometheus-token"), getMetrics)
			require.NoError(t, err)
			tt.revoke(s)
			_, err = r.Review(ctx, as("prometheus-token"), getMetrics)
			require.NoError(t, err, "the allowed answer is kept")
			clock.Step(allowedTTL - time.Second)
			_, err = r.Review(ctx, as("prometheus-token"), getMetrics)
			require.NoError(t, err, "the allowed answer is kept")
			clock.Step(time.Second + time.Millisecond)
			_, err = r.Review(ctx, as("prometheus-token"), getMetrics)
			require.ErrorIs(t, err, tt.err)
		})
	}
}

// A token is accepted only for an audience asked for, by the API server and again here: an
// authenticator that does not check audiences cannot hand us a token issued for someone else.
// Without audiences, the API server's own are asked.
func TestAudiences(t *testing.T) {
	tests := []struct {
		name            string
		audiences       []string
		ignoreAudiences bool // the API server's authenticator does not check them
		token           string
		msg             string // in the refusal; "": allowed
	}{
		{"the agent's token for the agent", []string{"sidecar-agent"}, false, "agent-token", ""},
		{"the API server's token for the agent", []string{"sidecar-agent"}, false, "api-token", "did not authenticate the token invalid bearer token"},
		{"the API server's token for the agent, audiences unchecked", []string{"sidecar-agent"}, true, "api-token", "token not issued for audience [sidecar-agent]"},
		{"one of several audiences", []string{"other", "sidecar-agent"}, true, "agent-token", ""},
		{"the API server's token without audiences", nil, false, "api-token", ""},
		{"the agent's token without audiences", nil, false, "agent-token", "did not authenticate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &reviewserver.Server{
				Tokens:          map[string]authenticationv1.UserInfo{"agent-token": {Username: prometheus}, "api-token": {Username: prometheus}},
				Audiences:       map[string][]string{"agent-token": {"sidecar-agent"}, "api-token": {reviewserver.APIAudience}},
				Allow:           func(string, authzv1.SubjectAccessReviewSpec) bool { return true },
				IgnoreAudiences: tt.ignoreAudiences,
			}
			r := NewReviewer(Options{Client: s.Client(), Audiences: tt.audiences})
			_, err := r.Review(context.Background(), as(tt.token), getMetrics)
			if tt.msg == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrUnauthenticated)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

func TestFromRequest(t *testing.T) {
	tests := []struct {
		remote, auth string
		want         Credentials
	}{
		{"192.0.2.1:1234", "Bearer abc", Credentials{Token: "abc", Source: "192.0.2.1"}},
		{"[2001:db8::1]:443", "bearer  abc ", Credentials{Token: "abc", Source: "2001:db8::1"}},
		{"192.0.2.1:1234", "Basic YWRtaW46YWRtaW4=", Credentials{Source: "192.0.2.1"}},
		{"192.0.2.1:1234", "", Credentials{Source: "192.0.2.1"}},
		{"@", "Bearer abc", Credentials{Token: "abc", Source: "@"}}, // a Unix socket's peer
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		assert.Equal(t, tt.want, FromRequest(r), "%s %q", tt.remote, tt.auth)
	}
}

// A flood's refusals are logged a few times, not once each, and the count of those skipped is
// handed to the next line logged.
func TestSampler(t *testing.T) {
	s := NewSampler()
	var logged []int64
	for range 100 {
		s.Do(func(skipped int64) { logged = append(logged, skipped) })
	}
	assert.Equal(t, []int64{0, 0, 0, 0, 0}, logged)
	assert.Equal(t, int64(95), s.skipped.Load())
}
