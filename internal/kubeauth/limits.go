package kubeauth

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Limits bound the reviews a Reviewer asks the API server, each a token bucket: a review is asked
// only when both the source's bucket and the global one hold a token, and refused at once
// (ErrThrottled) otherwise, never queued. Answers already kept spend nothing, so a caller whose
// token is known is never refused for what others send.
type Limits struct {
	// PerSource is the reviews per second one source may have asked, PerSourceBurst how many at
	// once: a flood from one address spends its own allowance only.
	PerSource      rate.Limit
	PerSourceBurst int
	// Global is the reviews per second of all sources together, GlobalBurst how many at once: what a
	// flood from many addresses can cost the API server.
	Global      rate.Limit
	GlobalBurst int
}

// DefaultLimits let one source have a few new callers' first requests at once (a new token costs
// two reviews: who it is, and its access) and a new one a second, and all sources together the
// rate client-go's default limiter let one process ask at before, with room for a burst of callers.
var DefaultLimits = Limits{PerSource: 1, PerSourceBurst: 10, Global: 5, GlobalBurst: 20}

// ClientConfig is cfg for the client of a Reviewer. It has no client-side rate limiter: every call
// of a Reviewer has passed its Limits, which refuse rather than wait, and a limiter of client-go's
// behind them would only queue admitted reviews behind each other, up to their timeout: the wait
// that denied fresh callers the API while made-up tokens flooded it.
func ClientConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	return c
}

// ErrThrottled is a review not asked because its source, or all sources together, had asked for
// too many lately (HTTP 429): the error is a *Throttled, saying when to retry.
var ErrThrottled = errors.New("too many reviews")

// Throttled is the error of a review Limits refused.
type Throttled struct {
	// Reason is the allowance that was spent: "source" (PerSource) or "global".
	Reason string
	// RetryAfter is when that allowance holds a review again.
	RetryAfter time.Duration
}

func (t *Throttled) Error() string {
	return fmt.Sprintf("%v of new tokens (%s allowance); retry after %v", ErrThrottled, t.Reason, t.RetryAfter)
}

// Unwrap makes a Throttled an ErrThrottled.
func (t *Throttled) Unwrap() error { return ErrThrottled }

// RetryAfterSeconds is the value of a Retry-After header: whole seconds, rounded up, at least one.
func (t *Throttled) RetryAfterSeconds() string {
	return fmt.Sprint(max(1, int(math.Ceil(t.RetryAfter.Seconds()))))
}

// limiter enforces Limits. The buckets of sources are kept in a bounded cache: one unused for as
// long as it takes to fill is full, so dropping it then loses nothing, and addresses beyond the
// bound can each spend a fresh PerSourceBurst, which Global bounds.
type limiter struct {
	l       Limits
	clock   clock.PassiveClock
	global  *rate.Limiter
	refill  time.Duration         // how long an empty source bucket takes to fill
	mu      sync.Mutex            // serialises admissions
	sources *cache.LRUExpireCache // source → *rate.Limiter
}

func newLimiter(l Limits, c clock.PassiveClock) *limiter {
	return &limiter{l: l, clock: c, global: rate.NewLimiter(l.Global, l.GlobalBurst),
		refill:  time.Duration(float64(l.PerSourceBurst) / float64(l.PerSource) * float64(time.Second)),
		sources: cache.NewLRUExpireCacheWithClock(cacheSize, c)}
}

// admit takes one review from source's allowance and the global one, or neither.
func (l *limiter) admit(source string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Read under the lock, so that the buckets see time go forward only: a rate.Limiter asked
	// with an earlier time than it last saw credits the time in between twice.
	now := l.clock.Now()
	v, ok := l.sources.Get(source)
	if !ok {
		v = rate.NewLimiter(l.l.PerSource, l.l.PerSourceBurst)
	}
	l.sources.Add(source, v, l.refill)
	src := v.(*rate.Limiter)
	for _, b := range []struct {
		reason string
		bucket *rate.Limiter
	}{{"source", src}, {"global", l.global}} {
		if tokens := b.bucket.TokensAt(now); tokens < 1 {
			return &Throttled{Reason: b.reason, RetryAfter: time.Duration((1 - tokens) / float64(b.bucket.Limit()) * float64(time.Second))}
		}
	}
	src.AllowN(now, 1)
	l.global.AllowN(now, 1)
	return nil
}

// Sampler runs a log call for the first few events and then once per sampleInterval, telling it
// how many it skipped since it last ran: anyone can make reviews fail or be refused many times a
// second, and must not fill the log. Safe for concurrent use; the zero value is not: use NewSampler.
type Sampler struct {
	sometimes *rate.Sometimes
	skipped   atomic.Int64
}

// NewSampler runs the first few events' log calls, then one per sampleInterval.
func NewSampler() *Sampler {
	return &Sampler{sometimes: &rate.Sometimes{First: 5, Interval: sampleInterval}}
}

// sampleInterval keeps a log readable through a flood and still shows, in a line of its own, that
// the flood goes on.
const sampleInterval = 10 * time.Second

// Do runs log, or counts it skipped.
func (s *Sampler) Do(log func(skipped int64)) {
	ran := false
	s.sometimes.Do(func() {
		ran = true
		log(s.skipped.Swap(0))
	})
	if !ran {
		s.skipped.Add(1)
	}
}
