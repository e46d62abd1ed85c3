package controller

import (
	"context"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// tcpPair is both ends of a loopback TCP connection, so that reads see the kernel's buffering as
// a connection to the API server does.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	server = <-accepted
	require.NotNil(t, server)
	t.Cleanup(func() {
		_ = client.Close()
		_ = server.Close()
	})
	return client, server
}

// A trickle is read in batches: after a read that waited, and after every delayed read that did
// not fill its buffer, the connection waits before reading, and what was written meanwhile comes
// in one read. A read that fills its buffer ends the trickle: the data behind it is read without
// waiting. The delay is a function the test controls, which writes while the reader "waits".
func TestCoalescingConn(t *testing.T) {
	in, out := tcpPair(t)
	// A read the connection fails to delay would wait for data nobody writes: fail it instead.
	require.NoError(t, in.SetReadDeadline(time.Now().Add(10*time.Second)))
	var during func() // what is written while the reader waits
	var delays []time.Duration
	c := &coalescingConn{Conn: in, delay: 20 * time.Millisecond, sleep: func(d time.Duration) {
		delays = append(delays, d)
		during()
		time.Sleep(10 * time.Millisecond) // what was written has reached the reader's socket
	}}
	write := func(msgs ...string) {
		for _, m := range msgs {
			_, err := out.Write([]byte(m))
			require.NoError(t, err)
		}
	}
	buf := make([]byte, 1024)
	read := func() string {
		n, err := c.Read(buf)
		require.NoError(t, err)
		return string(buf[:n])
	}

	// The first event arrives while the reader waits for it: read alone, at once.
	go func() {
		time.Sleep(20 * time.Millisecond)
		write("e0;")
	}()
	assert.Equal(t, "e0;", read())
	assert.Empty(t, delays)

	// The next read waits first; the three events written meanwhile come in one read.
	during = func() { write("e1;", "e2;", "e3;") }
	assert.Equal(t, "e1;e2;e3;", read())
	assert.Equal(t, []time.Duration{20 * time.Millisecond}, delays)

	// Still a trickle: a delayed read that did not fill its buffer is followed by another delay.
	during = func() { write("e4;") }
	assert.Equal(t, "e4;", read())
	assert.Len(t, delays, 2)

	// A list: 64 KiB arrive during the delay; the reads that fill their buffer, and the read of
	// the rest already received, do not wait.
	during = func() {
		go write(string(make([]byte, 64<<10)))
	}
	total := len(read())
	assert.Equal(t, len(buf), total, "the delayed read fills its buffer")
	for total < 64<<10 {
		total += len(read())
	}
	assert.Len(t, delays, 3, "reads of data already there are not delayed")

	// Idle, then one event: read at once again (the last read did not wait for its data).
	go func() {
		time.Sleep(20 * time.Millisecond)
		write("e5;")
	}()
	assert.Equal(t, "e5;", read())
	assert.Len(t, delays, 3)
}

// The pod informer's connections speak HTTP/1.1 to a server that offers HTTP/2 (which the
// manager's other connections speak), and are dialled through the configuration's own dialer if
// it has one.
func TestPodConnections(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	var dialled atomic.Int32
	cfg := &rest.Config{Host: srv.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			dialled.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, address)
		},
	}
	proto := func(cfg *rest.Config) string {
		hc, err := rest.HTTPClientFor(cfg)
		require.NoError(t, err)
		resp, err := hc.Get(srv.URL)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, "HTTP/2.0", proto(cfg), "the server speaks HTTP/2 to the manager's other clients")
	assert.Equal(t, "HTTP/1.1", proto(podConnections(cfg)))
	assert.Equal(t, int32(2), dialled.Load(), "both through the configuration's dialer")
	assert.Nil(t, cfg.NextProtos, "the configuration given is not changed")
}
