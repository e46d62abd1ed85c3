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
func TestBodyBufferFollowsWhatArrived(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, PodPath, strings.NewReader(`{"kind":"AdmissionReview"}`))
	r.ContentLength = maxReviewSize
	var body bytes.Buffer
	_, resp, throttled := readBody(r, &body, nil)
	require.Nil(t, resp)
	require.False(t, throttled)
	assert.Less(t, body.Cap(), 64<<10, "buffer capacity after 26 bytes arrived")
}

// stalledRequest opens a connection to srv and sends the headers of a POST to path declaring size
// bytes and only the first sent of them; the connection stays open. It sends from a goroutine and
// drops write errors: a server that refuses the request may answer and close before all is sent,
// and what a test checks is the answer.
func stalledRequest(t *testing.T, srv *httptest.Server, path string, size, sent int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	go func() {
		_, _ = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			path, size, strings.Repeat("x", sent))
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

// Once the admissions being decoded and answered fill InFlightBytes, one more is refused at once
// with 429 and Retry-After (counted), on every webhook path; room freed is taken again.
func TestInFlightBytes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	snaps := &blockingSnapshots{entered: make(chan struct{}, 4), release: make(chan struct{})}
	podBody := review(t, podRequest(t, "shop", podP1()))
	ssBody := review(t, sidecarSetRequest(t, admissionv1.Create, minimalSidecarSet("a", "web", "c"), nil))
	h := NewHandlers(snaps, m, logr.Discard())
	// Room for the two pod admissions held below, and not for a third admission of either kind.
	h.Limits = Limits{InFlightBytes: 2 * int64(len(podBody)+admissionOverhead)}
	srv := serve(t, h)
	client := srv.Client()

	var held sync.WaitGroup
	for range 2 {
		held.Go(func() {
			resp, err := client.Post(srv.URL+PodPath, "application/json", bytes.NewReader(podBody))
			if assert.NoError(t, err) {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			}
		})
	}
	<-snaps.entered
	<-snaps.entered

	for path, body := range map[string][]byte{PodPath: podBody, SidecarSetValidatePath: ssBody} {
		resp, err := client.Post(srv.URL+path, "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, path)
		assert.Equal(t, "1", resp.Header.Get("Retry-After"), path)
		assert.InDelta(t, 1, testutil.ToFloat64(m.throttled.WithLabelValues(path)), 0, path)
	}

	close(snaps.release)
	held.Wait()
	resp, err := client.Post(srv.URL+PodPath, "application/json", bytes.NewReader(podBody))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the slots are free again")
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

// Bodies over 1 MiB take room of their own before the rest is read: with room for one, a peer
// that sends 2 MiB of a declared 7 MiB and stalls makes the next large body 429 while it is being
// sent, and ordinary pods are still admitted.
func TestLargeBodiesTakeRoomOfTheirOwn(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	srv := serve(t, Handlers{PodInjector: &PodInjector{}, Metrics: m, Limits: Limits{LargeBodyBytes: maxReviewSize, BodyTimeout: time.Minute}})
	stalledRequest(t, srv, PodPath, maxReviewSize, 2<<20)
	require.Eventually(t, func() bool {
		// A probe that gets there before the first has taken the room takes it itself and is
		// answered nothing; the short deadline moves on to the next probe.
		conn := stalledRequest(t, srv, PodPath, maxReviewSize, 2<<20)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusTooManyRequests
	}, 20*time.Second, 50*time.Millisecond, "a second large body is refused while the first holds the room")
	assert.Positive(t, testutil.ToFloat64(m.throttled.WithLabelValues(PodPath)))

	resp, err := srv.Client().Post(srv.URL+PodPath, "application/json", bytes.NewReader(review(t, podRequest(t, "shop", podP1()))))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode, "an ordinary pod does not need the large-body room")
}
