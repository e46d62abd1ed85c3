package webhook

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Server serves what controller-runtime's DefaultServer would, with the bounds it lacks. If
// controller-runtime's options change (say, to add header or connection limits), this fails: look
// whether Server can go back to being DefaultServer, and whether the new option must be passed on.
func TestServerOptionsFollowControllerRuntime(t *testing.T) {
	var names []string
	for f := range reflect.TypeFor[crwebhook.Options]().Fields() {
		names = append(names, f.Name)
	}
	assert.Equal(t, []string{"Host", "Port", "CertDir", "CertName", "KeyName", "ClientCAName", "TLSOpts", "WebhookMux"}, names)
}

// startServer starts a Server with h's handlers on a free loopback port, with a certificate its
// returned client trusts.
func startServer(t *testing.T, h Handlers, maxConnections int) (base string, client *http.Client, m *Metrics) {
	t.Helper()
	// httptest's certificate (for 127.0.0.1), and a client trusting it.
	certs := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(certs.Close)
	cert := certs.TLS.Certificates[0]
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	m, err = NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	h.Metrics = m
	srv := NewServer(ServerOptions{Host: "127.0.0.1", Port: port, MaxConnections: maxConnections, Metrics: m,
		TLSOpts: []func(*tls.Config){TLSOptions(false), func(c *tls.Config) {
			c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }
		}}})
	Register(srv, h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool { return srv.StartedChecker()(nil) == nil }, 10*time.Second, 10*time.Millisecond)
	return fmt.Sprintf("https://127.0.0.1:%d", port), certs.Client(), m
}

// tlsDial opens a TLS connection to base with client's trust.
func tlsDial(t *testing.T, base string, client *http.Client) *tls.Conn {
	t.Helper()
	conn, err := tls.Dial("tcp", strings.TrimPrefix(base, "https://"), client.Transport.(*http.Transport).TLSClientConfig)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Headers are bounded to what an AdmissionReview needs: a peer sending a megabyte of them (which
// controller-runtime's server reads, and holds for 32 s when they stall) is answered 431 once past
// MaxHeaderBytes, before it has sent them all.
func TestServerBoundsHeaders(t *testing.T) {
	base, client, _ := startServer(t, Handlers{PodInjector: &PodInjector{}}, 0)
	conn := tlsDial(t, base, client)
	go func() {
		// Write errors are expected: the server answers and closes before all is sent.
		_, _ = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\n", PodPath)
		line := "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
		for range 1 << 10 {
			if _, err := io.WriteString(conn, line); err != nil {
				return
			}
		}
	}()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(ReadHeaderTimeout/2)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "no answer before the headers' deadline")
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
}

// Headers have a short deadline: a peer that sends part of them and stalls is cut.
func TestServerHeaderDeadline(t *testing.T) {
	t.Parallel()
	base, client, _ := startServer(t, Handlers{PodInjector: &PodInjector{}}, 0)
	conn := tlsDial(t, base, client)
	_, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\n", PodPath)
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(3*ReadHeaderTimeout)))
	_, err = io.ReadAll(conn) // the server closes the connection (net/http answers nothing to a timed-out read)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2*ReadHeaderTimeout)
}

// At the connection cap, the connection idle longest is closed for a new one, once idle for longer
// than a peer has to send its headers; with none idle, the new one waits until a slot is free.
// Both are counted.
func TestServerConnectionCap(t *testing.T) {
	t.Parallel()
	base, client, m := startServer(t, Handlers{PodInjector: &PodInjector{}}, 2)
	body := review(t, podRequest(t, "shop", podP1()))
	post := func(c *http.Client) int {
		return postStatus(t, c, base+PodPath, body)
	}
	// Two clients of one connection each, both left idle after a request.
	idle := []*http.Client{newClient(client), newClient(client)}
	for _, c := range idle {
		require.Equal(t, http.StatusOK, post(c))
	}
	// Idle for moments, between requests, a connection keeps its slot; once idle for longer than a
	// peer has for its headers, it is closed for a third, which is then served.
	start := time.Now()
	assert.Equal(t, http.StatusOK, post(newClient(client)))
	assert.GreaterOrEqual(t, time.Since(start), evictIdleAfter-time.Second, "a connection idle for moments was closed")
	assert.InDelta(t, 1, testutil.ToFloat64(m.throttled.WithLabelValues(ConnectionsLabel)), 0)

	// Two connections stalled in their headers hold both slots; a new request waits until the
	// header deadline frees one, and is then served.
	start = time.Now()
	for range 2 {
		conn := tlsDial(t, base, client)
		_, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\n", PodPath)
		require.NoError(t, err)
	}
	assert.Equal(t, http.StatusOK, post(newClient(client)))
	assert.Greater(t, time.Since(start), ReadHeaderTimeout/2, "served before a slot was free")
	assert.GreaterOrEqual(t, testutil.ToFloat64(m.throttled.WithLabelValues(ConnectionsLabel)), 2.0)
}

// newClient is a client with c's trust and a connection of its own.
func newClient(c *http.Client) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c.Transport.(*http.Transport).TLSClientConfig.Clone(), MaxConnsPerHost: 1}}
}
