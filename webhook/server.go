package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sidecarops/sidecarops/internal/kubeauth"
)

// What the webhook server allows of a request's headers: an AdmissionReview's are a few hundred
// bytes, and a connection that has not sent them by then is not the API server's. The TLS
// handshake has the same time (net/http applies ReadHeaderTimeout to it).
const (
	MaxHeaderBytes    = 16 << 10
	ReadHeaderTimeout = 5 * time.Second
	// idleTimeout is how long a kept-alive connection waits for its next request: the API
	// server's client keeps idle connections as long (net/http's default transport).
	idleTimeout = 90 * time.Second
	// evictIdleAfter is how long a connection must have been idle to be closed for a new one at the
	// connection cap: as long as a peer has to send its headers.
	evictIdleAfter = ReadHeaderTimeout
	// shutdownTimeout is how long requests being answered have when the server stops.
	shutdownTimeout = time.Minute
)

// ConnectionsLabel is the value of sidecarops_webhook_throttled_total's webhook label that counts
// connections that found every slot taken (Limits.MaxConnections).
const ConnectionsLabel = "connections"

// ServerOptions configure a Server.
type ServerOptions struct {
	// Host and Port the server listens on; Host "" is every address.
	Host string
	Port int
	// CertDir holds tls.crt and tls.key, reloaded when they change; unused when a TLSOpts function
	// sets GetCertificate.
	CertDir string
	TLSOpts []func(*tls.Config)
	// MaxConnections is the connections held open at once (Limits.MaxConnections; 0: the default).
	MaxConnections int
	// Metrics count connections that found no slot (nil: not counted).
	Metrics *Metrics
}

// Server is the webhook server the manager runs, a controller-runtime webhook.Server. Registering
// handlers, and the request metrics controller-runtime adds to them, are its DefaultServer's;
// serving is an http.Server of this package's, because DefaultServer's fixes what Limits must
// bound and exposes none of it: 1 MiB of headers that may take 32 s to arrive, and any number of
// connections. TestServerOptionsFollowControllerRuntime fails when controller-runtime's options
// change, to look again whether they now cover this.
type Server struct {
	crwebhook.Server
	o       ServerOptions
	started atomic.Bool
}

var _ crwebhook.Server = (*Server)(nil)

// NewServer makes a Server; nothing listens until Start.
func NewServer(o ServerOptions) *Server {
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	return &Server{Server: crwebhook.NewServer(crwebhook.Options{WebhookMux: http.NewServeMux()}), o: o}
}

// Start serves the registered handlers over TLS until ctx ends, then lets the requests being
// answered finish for up to a minute, as controller-runtime's server does.
func (s *Server) Start(ctx context.Context) error {
	// HTTP/2 unless a TLSOpts function says otherwise, as controller-runtime's server.
	cfg := &tls.Config{NextProtos: []string{"h2"}}
	for _, op := range s.o.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		w, err := certwatcher.New(filepath.Join(s.o.CertDir, "tls.crt"), filepath.Join(s.o.CertDir, "tls.key"))
		if err != nil {
			return err
		}
		cfg.GetCertificate = w.GetCertificate
		go func() {
			if err := w.Start(ctx); err != nil {
				serverLog.Error(err, "watching the webhook server's certificate")
			}
		}()
	}
	inner, err := net.Listen("tcp", net.JoinHostPort(s.o.Host, strconv.Itoa(s.o.Port)))
	if err != nil {
		return err
	}
	conns := newConnections(inner, s.o.MaxConnections, s.o.Metrics)
	srv := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return ctx },
		Handler:           s.WebhookMux(),
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ConnState:         conns.track,
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			serverLog.Error(err, "shutting down the webhook server")
		}
	}()
	s.started.Store(true)
	if err := srv.Serve(tls.NewListener(conns, cfg)); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-stopped
	return nil
}

// StartedChecker is healthy once the server has started and accepts a TLS connection.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("webhook server has not been started yet")
		}
		d := &net.Dialer{Timeout: 10 * time.Second}
		// Only that it is reachable: whose certificate it serves is the API server's to check.
		conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(s.o.Host, strconv.Itoa(s.o.Port)), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reachability only
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		return conn.Close()
	}
}

// connections hands out at most cap(slots) connections at once. When every slot is taken, the
// connection that has waited longest for its next request, if that is longer than evictIdleAfter,
// is closed to make room; otherwise the next connection waits in the listen queue (costing the
// process nothing) until one closes, which header, body and idle timeouts bound, and nothing more
// is accepted meanwhile. Either way it is counted and logged. A connection in use is idle for
// moments between requests, and closing it would hand its slot to whoever floods the listen queue:
// the API server's kept-alive connections must outlast a flood. Closing an idle connection can race
// with a request just sent on it, which the API server then sees fail, as at the idle timeout: only
// a peer holding every slot causes it.
type connections struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	idle      map[net.Conn]time.Time // kept-alive connections between requests, since when
	metrics   *Metrics
	sampler   *kubeauth.Sampler
}

func newConnections(l net.Listener, n int, m *Metrics) *connections {
	return &connections{Listener: l, slots: make(chan struct{}, n), closed: make(chan struct{}),
		idle: map[net.Conn]time.Time{}, metrics: m, sampler: kubeauth.NewSampler()}
}

func (l *connections) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	select {
	case l.slots <- struct{}{}:
	default:
		l.metrics.throttle(ConnectionsLabel)
		closedIdle := l.closeOldestIdle()
		l.sampler.Do(func(skipped int64) {
			serverLog.Info("every webhook connection slot is taken (webhook.Limits.MaxConnections)",
				"slots", cap(l.slots), "closedAnIdleOne", closedIdle, "sinceLastLine", skipped)
		})
		// Nothing more is accepted meanwhile: later connections wait in the listen queue. An idle
		// connection that was too fresh to close may since have been idle long enough.
		tick := time.NewTicker(evictIdleAfter / 5)
		defer tick.Stop()
		for waiting := true; waiting; {
			select {
			case l.slots <- struct{}{}:
				waiting = false
			case <-tick.C:
				l.closeOldestIdle()
			case <-l.closed:
				_ = c.Close()
				return nil, net.ErrClosed
			}
		}
	}
	return &slotConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
}

func (l *connections) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// track is the http.Server's ConnState hook: it keeps the set of idle connections.
func (l *connections) track(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == http.StateIdle {
		l.idle[c] = time.Now()
	} else {
		delete(l.idle, c)
	}
}

// closeOldestIdle closes the connection idle the longest, if any has been for evictIdleAfter.
func (l *connections) closeOldestIdle() bool {
	l.mu.Lock()
	var oldest net.Conn
	since := time.Now().Add(-evictIdleAfter)
	for c, t := range l.idle {
		if !t.After(since) {
			oldest, since = c, t
		}
	}
	delete(l.idle, oldest)
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	_ = oldest.Close() // its slot is free once closed; an error is a connection already gone
	return true
}

// slotConn gives its slot back when closed.
type slotConn struct {
	net.Conn
	release func()
}

func (c *slotConn) Close() error {
	c.release()
	return c.Conn.Close()
}
