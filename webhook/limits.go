package webhook

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/sync/semaphore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sidecarops/sidecarops/internal/kubeauth"
)

// serverLog is where the server logs refusals and faults: controller-runtime's logger, which the
// manager sets.
var serverLog = ctrllog.Log.WithName("webhook-server")

// Defaults of Limits.
const (
	// DefaultInFlightBytes of pod admissions decoded and answered at once. A review decodes to
	// several times its size (the pod, its injected copy, the patch), so 32 MiB of reviews in flight
	// stay within a few hundred MiB of heap, under the manager's 512 MiB limit; ordinary pods, a few
	// KiB each, count little more than admissionOverhead: about 450 fit at once.
	DefaultInFlightBytes = 32 << 20
	// DefaultLargeBodyBytes of pod request bodies past their first step (firstStep) being read at
	// once: about four reviews of the largest size. Pods that large are rare; a flood of them is an
	// attack.
	DefaultLargeBodyBytes = 32 << 20
	// DefaultOtherPathBytes is the room of each other path (SidecarSet defaulting, SidecarSet
	// validation, CRD conversion), for its admissions in flight and, apart, for its bodies past
	// their first step being read: one review of the largest size each. SidecarSets change rarely,
	// and the API server converts a list a page at a time.
	DefaultOtherPathBytes = maxReviewSize + admissionOverhead
	// DefaultBodyTimeout for a request body to arrive. The API server sends a review at once and
	// waits at most 30 s (the webhook's timeoutSeconds) for the answer, so a body still arriving
	// after this is not the API server's.
	DefaultBodyTimeout = 10 * time.Second
	// DefaultMaxConnections the webhook server holds open at once. The API server keeps a few
	// dozen connections to a webhook (client-go keeps up to 25 idle per host, per API server
	// replica); the rest is room for bursts.
	DefaultMaxConnections = 256
)

// firstStep is the room every request body takes before its first byte is read, from the room
// of first steps, which holds one for each connection the server may have open: over HTTP/1.1 a
// connection carries one request at a time, so an ordinary review (a few KiB) never finds that
// room taken, whatever other peers send or withhold. It is the size of a pooled buffer
// (maxPooled), which a request holds from its first byte.
const firstStep = maxPooled

// bodyStep is the least room a body past its first step takes before each further read; a body
// takes half of what it already holds when that is more, so that one of the largest size grows
// its buffer a few times, not dozens.
const bodyStep = 256 << 10

// admissionOverhead is what an admission counts beyond its body: the decision's and the answer's
// own allocations, so that many tiny requests are bounded too.
const admissionOverhead = 64 << 10

// Limits bound what peers that can reach the webhook port can make the server hold, in all and
// on each path. Every path has rooms of its own, so that no request to one path can take the room
// of another: above all, nothing sent to the SidecarSet or conversion paths can make pod
// admissions wait or fail.
//
// Every byte of a body is read into room taken before it arrives, and a body must arrive within
// BodyTimeout: its first firstStep bytes into the server's room of first steps (MaxConnections of
// them), the rest into its path's large-body room a step at a time, the buffer grown to exactly the
// room taken. The admissions decoded and answered at once hold at most the path's in-flight room
// (body size plus a fixed overhead each). One that finds no room is refused at once with 429 Too
// Many Requests and Retry-After (counted in sidecarops_webhook_throttled_total and logged,
// sampled), which the API server treats as a failed call (the webhook's failurePolicy applies).
// It does not wait: a waiting admission would hold its body, and bodies that wait are exactly what
// a flood of large reviews is made of, while ordinary pods are so small that about 450 fit in the
// default room at once. A declared Content-Length reserves nothing.
//
// Server holds at most MaxConnections connections open, with headers of at most MaxHeaderBytes
// that must arrive within ReadHeaderTimeout; docs/security.md derives the server's total from
// these. The zero value uses the defaults.
type Limits struct {
	// InFlightBytes and LargeBodyBytes are the pod path's rooms.
	InFlightBytes  int64
	LargeBodyBytes int64
	// OtherPathBytes is each other path's in-flight room and, apart, its large-body room.
	OtherPathBytes int64
	BodyTimeout    time.Duration
	// MaxConnections is the connections Server holds open at once, and the number of first steps
	// of bodies read at once.
	MaxConnections int
}

// gate enforces Limits for the handler of one path.
type gate struct {
	path        string
	first       room // the first steps of the bodies being read, shared by every path
	inFlight    room // admissions being decoded and answered
	large       room // bodies past their first step being read
	bodyTimeout time.Duration
	metrics     *Metrics
	sampler     *kubeauth.Sampler // logs refusals, a few and then one per interval
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
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	return l
}

// gates makes the gate of each path, all sharing one room of first steps.
type gates struct {
	limits  Limits
	first   room
	metrics *Metrics
	sampler *kubeauth.Sampler
}

func newGates(l Limits, m *Metrics) gates {
	l = l.withDefaults()
	return gates{limits: l, first: newRoom(int64(l.MaxConnections) * firstStep), metrics: m, sampler: kubeauth.NewSampler()}
}

// of is the gate of path: the pod path's rooms, or rooms of OtherPathBytes for any other.
func (gs gates) of(path string) *gate {
	l := gs.limits
	inFlight, large := l.InFlightBytes, l.LargeBodyBytes
	if path != PodPath {
		inFlight, large = l.OtherPathBytes, l.OtherPathBytes
	}
	return &gate{path: path, first: gs.first, inFlight: newRoom(inFlight), large: newRoom(large),
		bodyTimeout: l.BodyTimeout, metrics: gs.metrics, sampler: gs.sampler}
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

// bodyRoom is the room a body being read holds: its first step, and what it took past it.
type bodyRoom struct{ first, large int64 }

// grow makes held cover a buffer of want bytes, taking what is missing without waiting: the first
// step from the room of first steps, the rest from the path's large-body room. False when there
// is not enough left; what was taken stays in held, to be given back with it.
func (g *gate) grow(held *bodyRoom, want int64) bool {
	if g == nil {
		return true
	}
	if held.first == 0 {
		w, ok := g.first.take(firstStep)
		if !ok {
			return false
		}
		held.first = w
	}
	if more := want - held.first - held.large; more > 0 {
		w, ok := g.large.take(more)
		if !ok {
			return false
		}
		held.large += w
	}
	return true
}

// releaseBody gives back the room of a body once its request is answered.
func (g *gate) releaseBody(held bodyRoom) {
	if g != nil {
		g.first.give(held.first)
		g.large.give(held.large)
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
	g.sampler.Do(func(skipped int64) {
		serverLog.Info("refused an admission request: its path's room is taken (webhook.Limits)", "path", g.path, "refusedSinceLastLine", skipped)
	})
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
		held, readErr, throttled := readBody(r, body, g)
		defer g.releaseBody(held)
		if throttled {
			g.refuse(w)
			return
		}
		if readErr != nil {
			fail(w, *readErr)
			return
		}
		inFlight, ok := g.acquire(int64(body.Len()))
		if !ok {
			g.refuse(w)
			return
		}
		defer g.release(inFlight)
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
