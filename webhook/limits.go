package webhook

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/sync/semaphore"
)

// Defaults of Limits.
const (
	// DefaultInFlightBytes of admissions decoded and answered at once. A review decodes to several
	// times its size (the pod, its injected copy, the patch), so 32 MiB of reviews in flight stay
	// within a few hundred MiB of heap, under the manager's 512 MiB limit; ordinary pods, a few KiB
	// each, count little more than admissionOverhead: about 450 fit at once.
	DefaultInFlightBytes = 32 << 20
	// DefaultLargeBodyBytes of request bodies over smallBody being read at once, by declared size:
	// about four reviews of the largest size. Pods that large are rare; a flood of them is an attack.
	DefaultLargeBodyBytes = 32 << 20
	// DefaultBodyTimeout for a request body to arrive. The API server sends a review at once and
	// waits at most 30 s (the webhook's timeoutSeconds) for the answer, so a body still arriving
	// after this is not the API server's.
	DefaultBodyTimeout = 10 * time.Second
)

// smallBody is what any request may send without taking room first: ordinary pods are a few KiB.
const smallBody = 1 << 20

// admissionOverhead is what an admission counts beyond its body: the decision's and the answer's
// own allocations, so that many tiny requests are bounded too.
const admissionOverhead = 64 << 10

// Limits bound what one peer that can reach the webhook port can make the server hold: the memory
// of a request is what was actually received (nothing is allocated ahead of the bytes), a body must
// arrive within BodyTimeout, and the admissions decoded and answered at once, over all handlers,
// hold at most InFlightBytes (body size plus a fixed overhead each). One that finds no room is
// refused at once with 429 Too Many Requests and Retry-After, which the API server treats as a
// failed call (the webhook's failurePolicy applies). It does not wait: a waiting admission would
// hold its body, and bodies that wait are exactly what a flood of large reviews is made of, while
// ordinary pods are so small that about 450 fit in the default room at once. The zero
// value uses the defaults.
//
// Bodies over smallBody (1 MiB) take room of their own, LargeBodyBytes by declared size, before the
// rest is read: a flood of large reviews is refused while it is being sent, before it is held in
// memory, and peers that declare large bodies and stall hold that room only, never the room of
// ordinary pods.
type Limits struct {
	InFlightBytes  int64
	LargeBodyBytes int64
	BodyTimeout    time.Duration
}

// gate enforces Limits for the handlers of one server.
type gate struct {
	inFlight    room // admissions being decoded and answered
	large       room // bodies over smallBody being read
	bodyTimeout time.Duration
	metrics     *Metrics
}

// room is a byte budget taken without waiting.
type room struct {
	sem  *semaphore.Weighted
	size int64
}

func newRoom(size int64) room { return room{sem: semaphore.NewWeighted(size), size: size} }

// take takes n bytes (at most the whole room) and returns the weight to give back, or false when
// there is not enough left.
func (r room) take(n int64) (int64, bool) {
	w := min(n, r.size)
	if !r.sem.TryAcquire(w) {
		return 0, false
	}
	return w, true
}

func newGate(l Limits, m *Metrics) *gate {
	if l.InFlightBytes <= 0 {
		l.InFlightBytes = DefaultInFlightBytes
	}
	if l.LargeBodyBytes <= 0 {
		l.LargeBodyBytes = DefaultLargeBodyBytes
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	return &gate{inFlight: newRoom(l.InFlightBytes), large: newRoom(l.LargeBodyBytes), bodyTimeout: l.BodyTimeout, metrics: m}
}

// acquire takes room for an admission of a body of n bytes without waiting; it returns the weight
// to release, or false when there is no room. A nil gate admits everything (handlers built without
// Register, as in unit tests).
func (g *gate) acquire(n int64) (int64, bool) {
	if g == nil {
		return 0, true
	}
	return g.inFlight.take(n + admissionOverhead)
}

func (g *gate) release(w int64) {
	if g != nil && w > 0 {
		g.inFlight.sem.Release(w)
	}
}

// acquireLarge takes room to read a body of declared bytes beyond smallBody, without waiting.
func (g *gate) acquireLarge(declared int64) (int64, bool) {
	if g == nil {
		return 0, true
	}
	if declared < 0 || declared > maxReviewSize {
		declared = maxReviewSize + 1 // unknown or too large: reading stops past the limit anyway
	}
	return g.large.take(declared)
}

func (g *gate) releaseLarge(w int64) {
	if g != nil && w > 0 {
		g.large.sem.Release(w)
	}
}

// bodyDeadline makes reading the request's body fail once the body timeout has passed. net/http
// sets the connection's read deadline afresh for every request it reads, so the deadline ends with
// this request and a kept-alive connection serves the next one as usual.
func (g *gate) bodyDeadline(w http.ResponseWriter) {
	if g == nil {
		return
	}
	// A ResponseWriter that is not a connection's (a test recorder) has no deadline to set.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.bodyTimeout))
}

// refuse answers a request that found no room.
func (g *gate) refuse(w http.ResponseWriter, path string) {
	g.metrics.throttle(path)
	w.Header().Set("Retry-After", strconv.Itoa(1))
	http.Error(w, "too many admission requests in flight; retry", http.StatusTooManyRequests)
}

// wrap applies the limits to a handler that reads its own body (controller-runtime's
// admission.Webhook): room for the declared size (at most a review's) is taken before the body is
// read, which the body deadline bounds. SidecarSet admissions are rare; the pod path does better.
func (g *gate) wrap(path string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int64(maxReviewSize)
		if r.ContentLength >= 0 && r.ContentLength < n {
			n = r.ContentLength
		}
		held, ok := g.acquire(n)
		if !ok {
			g.refuse(w, path)
			return
		}
		defer g.release(held)
		g.bodyDeadline(w)
		h.ServeHTTP(w, r)
	})
}

// errBodyTimeout names a body that did not arrive in time.
var errBodyTimeout = errors.New("the request body did not arrive in time")
