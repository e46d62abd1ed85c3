package webhook

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
)

// muxServer mounts handlers on a ServeMux, as controller-runtime's webhook server mounts them.
type muxServer struct{ *http.ServeMux }

func (m muxServer) Register(path string, h http.Handler) { m.Handle(path, h) }

// serve mounts h's handlers with limits on a real HTTP server (connections, deadlines).
func serve(t *testing.T, h Handlers) *httptest.Server {
	t.Helper()
	mux := muxServer{http.NewServeMux()}
	Register(mux, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// A declared Content-Length costs nothing until the bytes arrive: before the fix the buffer grew
// to the declared size (up to 7 MiB) before reading, so idle connections held that much each.
// Every byte that arrives is read into room taken before it (issue 35: the first MiB of every
// body was read without any), the buffer is exactly that room, and the room is at most what arrived
// plus one step.
func TestBodyBufferIsTheRoomTaken(t *testing.T) {
	for _, size := range []int{26, firstStep - 1, firstStep, firstStep + 1, 3 << 20, maxReviewSize} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, PodPath, strings.NewReader(strings.Repeat(" ", size)))
			r.ContentLength = maxReviewSize
			g := newGates(Limits{}, nil).of(PodPath)
			var body bytes.Buffer
			held, resp, throttled := readBody(r, &body, g)
			require.Nil(t, resp)
			require.False(t, throttled)
			require.Equal(t, size, body.Len())
			assert.Equal(t, int64(body.Cap()), held.first+held.large, "the buffer is the room taken")
			assert.LessOrEqual(t, body.Cap(), max(firstStep, size+max(bodyStep, size/2)), "room past what arrived")
			g.releaseBody(held)
			assert.True(t, g.first.sem.TryAcquire(g.first.size) && g.large.sem.TryAcquire(g.large.size), "room given back")
		})
	}
}

// stalledRequest opens a connection to srv and sends the headers of a POST to path declaring size
// bytes and only the first sent of them, blanks, which a JSON decoder reading as they arrive waits
// past for the rest; the connection stays open. It sends from a goroutine and drops write errors:
// a server that refuses the request may answer and close before all is sent, and what a test
// checks is the answer.
func stalledRequest(t *testing.T, srv *httptest.Server, path string, size, sent int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	go func() {
		_, _ = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			path, size, strings.Repeat(" ", sent))
	}()
	return conn
}

// A body that stops arriving is cut at the body deadline and answered, instead of holding its
// connection, goroutine and bytes for as long as the peer likes.
func TestBodyDeadline(t *testing.T) {
	srv := serve(t, Handlers{PodInjector: &PodInjector{}, Limits: Limits{BodyTimeout: 200 * time.Millisecond}})
	conn := stalledRequest(t, srv, PodPath, 1<<20, 10)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "no answer: the body was waited for without a deadline")
	defer resp.Body.Close()
	var rv admissionv1.AdmissionReview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rv))
	require.NotNil(t, rv.Response)
	assert.False(t, rv.Response.Allowed)
	assert.Equal(t, int32(http.StatusBadRequest), rv.Response.Result.Code)
	assert.Contains(t, rv.Response.Result.Message, "did not arrive in time")
}

// The deadline is the body's, not the connection's: a kept-alive connection serves the next
// request however long after the first it comes.
func TestBodyDeadlineDoesNotOutliveTheRequest(t *testing.T) {
	srv := serve(t, Handlers{PodInjector: &PodInjector{}, Limits: Limits{BodyTimeout: 100 * time.Millisecond}})
	client := srv.Client()
	body := review(t, podRequest(t, "shop", podP1()))
	for i := range 2 {
		resp, err := client.Post(srv.URL+PodPath, "application/json", bytes.NewReader(body))
		require.NoError(t, err, "request %d", i)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d", i)
		time.Sleep(300 * time.Millisecond)
	}
}

// blockingSnapshots holds every admission that asks for the snapshot until release is closed.
type blockingSnapshots struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingSnapshots) Current() *engine.Snapshot {
	b.entered <- struct{}{}
	<-b.release
	return nil
}

// Once the admissions being decoded and answered fill a path's in-flight room, one more is refused
// at once with 429 and Retry-After (counted); room freed is taken again.
func TestInFlightBytes(t *testing.T) {
	podBody := review(t, podRequest(t, "shop", podP1()))
	ssBody := review(t, sidecarSetRequest(t, admissionv1.Create, minimalSidecarSet("a", "web", "c"), nil))
	for _, tc := range []struct {
		path   string
		body   []byte
		limits func(room int64) Limits
	}{
		{PodPath, podBody, func(room int64) Limits { return Limits{InFlightBytes: room} }},
		{SidecarSetValidatePath, ssBody, func(room int64) Limits { return Limits{OtherPathBytes: room} }},
	} {
		t.Run(tc.path, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg)
			require.NoError(t, err)
			snaps := &blockingSnapshots{entered: make(chan struct{}, 4), release: make(chan struct{})}
			h := NewHandlers(snaps, m, logr.Discard())
			// Room for the two admissions held below, and not for a third.
			h.Limits = tc.limits(2 * int64(len(tc.body)+admissionOverhead))
			srv := serve(t, h)
			client := srv.Client()

			var held sync.WaitGroup
			for range 2 {
				held.Go(func() {
					assert.Equal(t, http.StatusOK, postStatus(t, client, srv.URL+tc.path, tc.body))
				})
			}
			<-snaps.entered
			<-snaps.entered

			resp, err := client.Post(srv.URL+tc.path, "application/json", bytes.NewReader(tc.body))
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			assert.Equal(t, "1", resp.Header.Get("Retry-After"))
			assert.InDelta(t, 1, testutil.ToFloat64(m.throttled.WithLabelValues(tc.path)), 0)

			close(snaps.release)
			held.Wait()
			assert.Equal(t, http.StatusOK, postStatus(t, client, srv.URL+tc.path, tc.body), "the room is free again")
		})
	}
}

// postStatus posts body to url and returns the answer's status code.
func postStatus(t *testing.T, client *http.Client, url string, body []byte) int {
	t.Helper()
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if !assert.NoError(t, err) {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// postReview posts an AdmissionReview over srv's connections and decodes the answer.
func postReview(t *testing.T, srv *httptest.Server, path string, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	resp, err := srv.Client().Post(srv.URL+path, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	require.NotNil(t, out.Response, "%s", raw)
	return out.Response
}

// Issue 28, item 1: the SidecarSet and conversion paths took room of one budget shared with the pod
// path, by declared size and before reading: four connections declaring 7 MiB to /convert and
// sending one byte, and 60 small ones to the SidecarSet paths, made every pod review 429 until the
// body deadline. Each path has rooms of its own, and a declared size reserves nothing.
func TestOtherPathsCannotTakeThePodPathsRoom(t *testing.T) {
	h := Handlers{
		PodInjector: &PodInjector{Snapshots: newEngine(t, policyState{sidecarSets: []*v1beta1.SidecarSet{ss1()}})},
		Defaulter:   &SidecarSetDefaulter{},
		Validator:   &SidecarSetValidator{},
		Converter:   conversionHandler(t),
		Limits:      Limits{BodyTimeout: time.Minute},
	}
	srv := serve(t, h)
	for range 4 {
		stalledRequest(t, srv, ConvertPath, 7<<20, 1)
	}
	for i := range 60 {
		path := []string{SidecarSetValidatePath, SidecarSetDefaultPath}[i%2]
		stalledRequest(t, srv, path, 8<<10, 1)
	}
	time.Sleep(100 * time.Millisecond) // the stalled requests are being read

	got := postReview(t, srv, PodPath, review(t, podRequest(t, "shop", podP1())))
	assert.True(t, got.Allowed, "the pod review was not answered: %+v", got.Result)
	assert.NotEmpty(t, got.Patch, "the pod was not injected")
}

// A stalled body holds no room: with room for one ordinary admission and a peer trickling a body
// it declares to be 7 MiB, an ordinary review is still admitted at once.
func TestStalledBodyHoldsNoSlot(t *testing.T) {
	srv := serve(t, Handlers{PodInjector: &PodInjector{}, Limits: Limits{InFlightBytes: 2 * admissionOverhead, BodyTimeout: time.Minute}})
	stalledRequest(t, srv, PodPath, 7<<20, 100)
	time.Sleep(50 * time.Millisecond) // the stalled request is being read
	resp, err := srv.Client().Post(srv.URL+PodPath, "application/json", bytes.NewReader(review(t, podRequest(t, "shop", podP1()))))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// Bodies past their first step take room of their own before the rest is read: with room for one, a
// peer that sends part of a declared 7 MiB and stalls makes the next such body 429 while it is being
// sent, and ordinary pods are still admitted. Issue 35, item 1: a body's first MiB was read without
// taking any room, so bodies stalled just under 1 MiB were never refused and held memory no budget
// counted.
func TestStalledBodiesTakeRoom(t *testing.T) {
	for _, tc := range []struct {
		name       string
		room, sent int64
	}{
		{"large bodies", maxReviewSize, 2 << 20},
		{"bodies under 1 MiB", 1 << 20, 1<<20 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg)
			require.NoError(t, err)
			srv := serve(t, Handlers{PodInjector: &PodInjector{}, Metrics: m, Limits: Limits{LargeBodyBytes: tc.room, BodyTimeout: time.Minute}})
			stalledRequest(t, srv, PodPath, maxReviewSize, int(tc.sent))
			require.Eventually(t, func() bool {
				// A probe that gets there before the first has taken the room takes it itself and is
				// answered nothing; the short deadline moves on to the next probe.
				conn := stalledRequest(t, srv, PodPath, maxReviewSize, int(tc.sent))
				require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Second)))
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					return false
				}
				_ = resp.Body.Close()
				return resp.StatusCode == http.StatusTooManyRequests
			}, 20*time.Second, 50*time.Millisecond, "a second stalled body is refused while the first holds the room")
			assert.Positive(t, testutil.ToFloat64(m.throttled.WithLabelValues(PodPath)))
			assert.Equal(t, http.StatusOK, postStatus(t, srv.Client(), srv.URL+PodPath, review(t, podRequest(t, "shop", podP1()))),
				"an ordinary pod needs only its first step")
		})
	}
}
