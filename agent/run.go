package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// RunOptions configure Run.
type RunOptions struct {
	ManagerOptions
	// ConfigPath is config.yaml, typically mounted from a ConfigMap.
	ConfigPath string
	// Listener serves the HTTP face; Run closes it.
	Listener net.Listener
	// Authorizer admits callers of the API; nil (no Kubernetes API) admits nobody but the kubelet's
	// /healthz.
	Authorizer Authorizer
	// ReloadInterval is how often config.yaml is re-read (default 5s). The kubelet swaps a mounted
	// ConfigMap by a symlink change that inotify on the file does not see, so the file is polled.
	ReloadInterval time.Duration
	// ShutdownTimeout bounds the HTTP server's graceful shutdown (default 10s).
	ShutdownTimeout time.Duration
}

// Run loads the configuration (an invalid one is returned as the error, before anything starts),
// starts the plugins in boot order, serves HTTP and reloads config.yaml when it changes, until ctx
// ends; then it stops the plugins in reverse order and shuts the server down gracefully.
func Run(ctx context.Context, o RunOptions) error {
	if o.ReloadInterval <= 0 {
		o.ReloadInterval = 5 * time.Second
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 10 * time.Second
	}
	data, err := os.ReadFile(o.ConfigPath)
	if err != nil {
		o.Listener.Close()
		return fmt.Errorf("agent config: %w", err)
	}
	cfg, err := ParseConfig(o.ConfigPath, data, o.Registry)
	if err != nil {
		o.Listener.Close()
		return err
	}
	m := NewManager(o.ManagerOptions)
	if err := m.Setup(cfg); err != nil {
		o.Listener.Close()
		return err
	}
	srv := NewServer(m, o.Authorizer)
	srv.setConfig(o.ConfigPath, cfg)
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(o.Listener) }()
	m.StartAll(ctx)
	o.Logger.Info("agent running", "addr", o.Listener.Addr().String(), "plugins", len(cfg.Plugins))

	tick := time.NewTicker(o.ReloadInterval)
	defer tick.Stop()
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-serveErr:
			runErr = fmt.Errorf("agent: HTTP server: %w", err)
			break loop
		case <-tick.C:
			next, err := os.ReadFile(o.ConfigPath)
			if err != nil || bytes.Equal(next, data) {
				if err != nil {
					o.Logger.Error(err, "re-reading config.yaml; the running configuration stays")
				}
				continue
			}
			data = next
			reload(ctx, o, m, srv, data)
		}
	}
	o.Logger.Info("agent stopping")
	m.StopAll()
	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		runErr = errors.Join(runErr, err)
	}
	return runErr
}

// reload applies a changed config.yaml; a rejected one leaves the running plugins untouched and
// is reported in /status until a valid one replaces it.
func reload(ctx context.Context, o RunOptions, m *Manager, srv *Server, data []byte) {
	cfg, err := ParseConfig(o.ConfigPath, data, o.Registry)
	if err != nil {
		o.Logger.Error(err, "config.yaml changed but is invalid; the running configuration stays")
		m.o.Metrics.reloads.WithLabelValues("rejected").Inc()
		srv.setRejected(err.Error())
		return
	}
	srv.setConfig(o.ConfigPath, cfg)
	if err := m.Apply(ctx, cfg); err != nil {
		o.Logger.Error(err, "applying the new config.yaml")
		m.o.Metrics.reloads.WithLabelValues("rejected").Inc()
		srv.setRejected(err.Error())
		return
	}
	m.o.Metrics.reloads.WithLabelValues("applied").Inc()
	o.Logger.Info("config.yaml reloaded", "plugins", len(cfg.Plugins))
}
