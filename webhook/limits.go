package webhook

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/sync/semaphore"
)

// Defaults of Limits.
const (
	// DefaultInFlightBytes of pod admissions decoded and answered at once. A review decodes to
	// several times its size (the pod, its injected copy, the patch), so 32 MiB of reviews in flight
	// stay within a few hundred MiB of heap, under the manager's 512 MiB limit; ordinary pods, a few
	// KiB each, count little more than admissionOverhead: about 450 fit at once.
	DefaultInFlightBytes = 32 << 20
	// DefaultLargeBodyBytes of pod request bodies over smallBody being read at once: about four
	// reviews of the largest size. Pods that large are rare; a flood of them is an attack.
	DefaultLargeBodyBytes = 32 << 20
	// DefaultOtherPathBytes is the room of each other path (SidecarSet defaulting, SidecarSet
	// validation, CRD conversion), for its admissions in flight and, apart, for its bodies over
	// smallBody being read: one review of the largest size each. SidecarSets change rarely, and
	// the API server converts a list a page at a time.
	DefaultOtherPathBytes = maxReviewSize + admissionOverhead
	// DefaultBodyTimeout for a request body to arrive. The API server sends a review at once and
	// waits at most 30 s (the webhook's timeoutSeconds) for the answer, so a body still arriving
	// after this is not the API server's.
	DefaultBodyTimeout = 10 * time.Second
)

// smallBody is what any request may send without taking room first, and the step in which larger
// bodies take room as they arrive: ordinary pods are a few KiB.
const smallBody = 1 << 20

// admissionOverhead is what an admission counts beyond its body: the decision's and the answer's
// own allocations, so that many tiny requests are bounded too.
const admissionOverhead = 64 << 10

// Limits bound what one peer that can reach the webhook port can make the server hold. Every path
// has rooms of its own, so that no request to one path can take the room of another: above all,
// nothing sent to the SidecarSet or conversion paths can make pod admissions wait or fail.
//
// On each path, the memory of a request is what was actually received (nothing is allocated or
// reserved ahead of the bytes), a body must arrive within BodyTimeout, and the admissions decoded
// and answered at once hold at most the path's in-flight room (body size plus a fixed overhead
// each). One that finds no room is refused at once with 429 Too Many Requests and Retry-After,
// which the API server treats as a failed call (the webhook's failurePolicy applies). It does not
// wait: a waiting admission would hold its body, and bodies that wait are exactly what a flood of
// large reviews is made of, while ordinary pods are so small that about 450 fit in the default
// room at once.
//
// Bodies over smallBody (1 MiB) take the path's large-body room as they arrive, a step of
// smallBody before each step is read: a flood of large reviews is refused while it is being sent,
// and peers that send part of a large body and stall hold the large-body room for what they sent,
// never the room of ordinary pods. A declared Content-Length reserves nothing. The zero value uses
// the defaults.
type Limits struct {
	// InFlightBytes and LargeBodyBytes are the pod path's rooms.
	InFlightBytes  int64
	LargeBodyBytes int64
	// OtherPathBytes is each other path's in-flight room and, apart, its large-body room.
	OtherPathBytes int64
	BodyTimeout    time.Duration
}

// gate enforces Limits for the handler of one path.
type gate struct {
	path        string
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

func (r room) give(w int64) {
	if w > 0 {
		r.sem.Release(w)
	}
}

// withDefaults is l with every zero field set to its default.
func (l Limits) withDefaults() Limits {
	if l.InFlightBytes <= 0 {
		l.InFlightBytes = DefaultInFlightBytes
	}
	if l.LargeBodyBytes <= 0 {
		l.LargeBodyBytes = DefaultLargeBodyBytes
	}
	if l.OtherPathBytes <= 0 {
		l.OtherPathBytes = DefaultOtherPathBytes
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	return l
}

// newGate is the gate of path: the pod path's rooms, or rooms of OtherPathBytes for any other.
func newGate(path string, l Limits, m *Metrics) *gate {
	l = l.withDefaults()
	inFlight, large := l.InFlightBytes, l.LargeBodyBytes
	if path != PodPath {
		inFlight, large = l.OtherPathBytes, l.OtherPathBytes
	}
	return &gate{path: path, inFlight: newRoom(inFlight), large: newRoom(large), bodyTimeout: l.BodyTimeout, metrics: m}
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
	if g != nil {
		g.inFlight.give(w)
	}
}

// acquireLarge takes room for the next smallBody bytes of a body being read, without waiting.
func (g *gate) acquireLarge() (int64, bool) {
	if g == nil {
		return 0, true
	}
	return g.large.take(smallBody)
}

func (g *gate) releaseLarge(w int64) {
	if g != nil {
		g.large.give(w)
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
func (g *gate) refuse(w http.ResponseWriter) {
	g.metrics.throttle(g.path)
	w.Header().Set("Retry-After", strconv.Itoa(1))
	http.Error(w, "too many admission requests in flight; retry", http.StatusTooManyRequests)
}

// wrap applies the path's limits to a handler that reads its own body (controller-runtime's
// admission.Webhook and conversion handler). The body is read here, as the pod path reads its
// own, and the handler reads it from memory, so no handler ever reads more than a review's size
// from the connection. fail answers a body that could not be read; check, when not nil, sees the
// body before the handler does and answers itself when it returns false.
func (g *gate) wrap(h http.Handler, fail func(http.ResponseWriter, reviewResponse), check func(http.ResponseWriter, []byte) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := buffers.Get().(*bytes.Buffer)
		defer putBuffer(body)
		g.bodyDeadline(w)
		largeHeld, readErr, throttled := readBody(r, body, g)
		defer g.releaseLarge(largeHeld)
		if throttled {
			g.refuse(w)
			return
		}
		if readErr != nil {
			fail(w, *readErr)
			return
		}
		held, ok := g.acquire(int64(body.Len()))
		if !ok {
			g.refuse(w)
			return
		}
		defer g.release(held)
		if check != nil && !check(w, body.Bytes()) {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body.Bytes()))
		r.ContentLength = int64(body.Len())
		h.ServeHTTP(w, r)
	})
}

// errBodyTimeout names a body that did not arrive in time.
var errBodyTimeout = errors.New("the request body did not arrive in time")
