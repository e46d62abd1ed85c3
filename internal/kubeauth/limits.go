package kubeauth

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Limits bound the reviews a Reviewer asks the API server, each a token bucket; a review is refused
// at once (ErrThrottled) when the buckets it may spend are empty, never queued. Answers already kept
// spend nothing, so a caller whose answer is kept is never refused for what others send.
//
// A review of something the API server has not allowed before spends its source's bucket and then
// the global one or, once that is empty, the reserved one: a source may spend the reserve while none
// of its requests has been refused lately (refusedSourceTTL) and it has no other review of the
// reserve under way. Made-up tokens are refused, so a flood's addresses each spend the reserve once,
// then only the global bucket, and callers with valid tokens elsewhere keep the reserve to
// themselves. A re-review of a token and access the API server allowed (a known caller's answer
// expiring, or refreshed ahead of expiry) spends the known bucket, which only such re-reviews
// spend, and when that is empty, the others as a first review does.
//
// What a flood costs the API server is thus bounded by Global plus Reserved (plus their bursts), and
// Known adds only what callers the API server allowed ask.
type Limits struct {
	// PerSource is the first reviews per second one source may have asked, PerSourceBurst how many
	// at once: a flood from one address spends its own allowance only. A source is an IPv4 address,
	// or an IPv6 address's /64 (sourceKey).
	PerSource      rate.Limit
	PerSourceBurst int
	// Global is the first reviews per second of all sources together, GlobalBurst how many at once.
	Global      rate.Limit
	GlobalBurst int
	// Reserved is the first reviews per second of sources not refused lately, beyond Global; zero:
	// no reserve.
	Reserved      rate.Limit
	ReservedBurst int
	// Known is the re-reviews per second of tokens and accesses the API server allowed; zero: they
	// spend what first reviews do.
	Known      rate.Limit
	KnownBurst int
}

// DefaultLimits let one source have a few new callers' first requests at once (a new token costs
// two reviews: who it is, and its access) and a new one a second, and all sources together the
// rate client-go's default limiter let one process ask at before, with room for a burst of callers;
// the reserve and the known allowance each add less than that.
var DefaultLimits = Limits{PerSource: 1, PerSourceBurst: 10, Global: 5, GlobalBurst: 20, Reserved: 2, ReservedBurst: 10, Known: 2, KnownBurst: 10}

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
	// Reason is the allowance that was spent: "source" (PerSource) or "global" (Global, and
	// Reserved when the source may spend it).
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

// refusedSourceTTL is how long a source whose request was refused (401, 403) may not spend the
// reserve: long enough that a flood's addresses, each refused once, stay out of it while they
// flood; short enough that an address whose caller once sent a wrong token has it back soon.
const refusedSourceTTL = 5 * time.Minute

// limiter enforces Limits. The buckets of sources are kept in a bounded cache: one unused for as
// long as it takes to fill is full, so dropping it then loses nothing, and sources beyond the
// bound can each spend a fresh PerSourceBurst, which Global bounds. The sources refused lately are
// kept in a bounded cache too: past its bound, a flood's addresses can spend the reserve again,
// which Reserved bounds.
type limiter struct {
	l                       Limits
	clock                   clock.PassiveClock
	global, reserved, known *rate.Limiter
	refill                  time.Duration         // how long an empty source bucket takes to fill
	sources                 *cache.LRUExpireCache // source → *rate.Limiter
	refused                 *cache.LRUExpireCache // source → struct{}: refused lately
	mu                      sync.Mutex            // serialises admissions
	reserving               map[string]bool       // sources with a review of the reserve under way
}

func newLimiter(l Limits, c clock.PassiveClock) *limiter {
	return &limiter{l: l, clock: c, global: rate.NewLimiter(l.Global, l.GlobalBurst),
		reserved: rate.NewLimiter(l.Reserved, l.ReservedBurst), known: rate.NewLimiter(l.Known, l.KnownBurst),
		refill:  time.Duration(float64(l.PerSourceBurst) / float64(l.PerSource) * float64(time.Second)),
		sources: cache.NewLRUExpireCacheWithClock(cacheSize, c), refused: cache.NewLRUExpireCacheWithClock(cacheSize, c),
		reserving: map[string]bool{}}
}

// admit takes one review from the allowances source may spend (Limits), a known one (the re-review
// of an answer the API server allowed) first from the known allowance; done gives back what only a
// review under way holds.
func (l *limiter) admit(source string, known bool) (done func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Read under the lock, so that the buckets see time go forward only: a rate.Limiter asked
	// with an earlier time than it last saw credits the time in between twice.
	now := l.clock.Now()
	nothing := func() {}
	if known && l.known.AllowN(now, 1) {
		return nothing, nil
	}
	key := sourceKey(source)
	v, ok := l.sources.Get(key)
	if !ok {
		v = rate.NewLimiter(l.l.PerSource, l.l.PerSourceBurst)
	}
	l.sources.Add(key, v, l.refill)
	src := v.(*rate.Limiter)
	if src.TokensAt(now) < 1 {
		return nil, throttled("source", src, now)
	}
	if l.global.AllowN(now, 1) {
		src.AllowN(now, 1)
		return nothing, nil
	}
	if _, refused := l.refused.Get(key); !refused && !l.reserving[key] && l.reserved.AllowN(now, 1) {
		src.AllowN(now, 1)
		l.reserving[key] = true
		return func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(l.reserving, key)
		}, nil
	}
	return nil, throttled("global", l.global, now)
}

// refusedFrom notes that a request from source was refused.
func (l *limiter) refusedFrom(source string) {
	l.refused.Add(sourceKey(source), struct{}{}, refusedSourceTTL)
}

func throttled(reason string, b *rate.Limiter, now time.Time) *Throttled {
	return &Throttled{Reason: reason, RetryAfter: time.Duration((1 - b.TokensAt(now)) / float64(b.Limit()) * float64(time.Second))}
}

// sourceKey is whose allowance a request from source spends: an IPv4 address its own, an IPv6
// address its /64's, which one host commonly holds whole (SLAAC and temporary addresses, a node's
// range of pod addresses), so that it cannot spend an allowance per address. Anything else (a Unix
// socket's peer) is its own.
func sourceKey(source string) string {
	addr, err := netip.ParseAddr(source)
	if err != nil {
		return source
	}
	if addr = addr.Unmap(); addr.Is4() {
		return addr.String()
	}
	prefix, err := addr.WithZone("").Prefix(64)
	if err != nil {
		return source
	}
	return prefix.String()
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
