package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/webhook"
)

// server is a webhook server started in this process, configured as the manager configures its
// own (manager.New): webhook.Server, TLS ≥ 1.2, the three handlers mounted by
// webhook.Register, Prometheus metrics, and the decision log unless turned off.
type server struct {
	url    string
	pool   *x509.CertPool // trusts the generated CA only
	caFile string         // the generated CA, PEM, for a client in another process (--ca-file)
	// mux serves the handlers without the network, for the in-process measure beside the run.
	mux *http.ServeMux
	// compile is the time injector.Snapshot (compile and prepare) took for the fleet.
	compile time.Duration
	stop    func() error
}

// startServer compiles a snapshot of sets and serves it over HTTPS on a free loopback port.
// decisionLog encodes one JSON line per pod decision as the manager's default does, into
// io.Discard: the encoding is the webhook's cost, writing the line to a terminal is not.
func startServer(ctx context.Context, sets []*v1beta1.SidecarSet, decisionLog bool) (*server, error) {
	began := time.Now()
	snap, err := injector.Snapshot(ctx, injector.Policies{State: bundles.State{SidecarSets: sets}})
	if err != nil {
		return nil, fmt.Errorf("compiling the fleet: %w", err)
	}
	var eng engine.Engine
	eng.Swap(snap)
	compiled := time.Since(began)

	dir, err := os.MkdirTemp("", "sidecarops-loadgen-")
	if err != nil {
		return nil, err
	}
	pool, err := writeCertificates(dir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	// A registry of its own: the global one would make a second server in the same process (the
	// benchmark's sub-benchmarks) share series.
	metrics, err := webhook.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	log := logr.Discard()
	if decisionLog {
		log = zap.New(zap.WriteTo(io.Discard))
	}
	port, err := freePort()
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	srv := webhook.NewServer(webhook.ServerOptions{
		Host: "127.0.0.1", Port: port, CertDir: dir, Metrics: metrics,
		// The manager's TLS, with HTTP/2 offered: the load generator measures both protocols.
		TLSOpts: []func(*tls.Config){webhook.TLSOptions(true)},
	})
	handlers := webhook.NewHandlers(&eng, metrics, log)
	// The manager's conversion handler (package manager), for attacks on /convert.
	scheme := runtime.NewScheme()
	if err := errors.Join(v1beta1.AddToScheme(scheme), v1alpha1.AddToScheme(scheme)); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	handlers.Converter = crconversion.NewWebhookHandler(scheme, crconversion.NewRegistry())
	webhook.Register(srv, handlers)

	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	stop := func() error {
		cancel()
		return errors.Join(<-done, os.RemoveAll(dir))
	}
	started := srv.StartedChecker()
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case err := <-done:
			cancel()
			return nil, errors.Join(fmt.Errorf("webhook server: %w", err), os.RemoveAll(dir))
		default:
		}
		if started(nil) == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(errors.New("webhook server did not start within 10s"), stop())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return &server{
		url:     fmt.Sprintf("https://127.0.0.1:%d%s", port, webhook.PodPath),
		pool:    pool,
		caFile:  filepath.Join(dir, "ca.crt"),
		mux:     srv.WebhookMux(),
		compile: compiled,
		stop:    stop,
	}, nil
}

// freePort asks the kernel for a free loopback port. The webhook server takes a port
// number (the manager's --webhook-port), not a listener, so there is a short window in which
// another process could take it; the server then fails to start and says so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

// writeCertificates generates a CA and a serving certificate it signs for 127.0.0.1 and localhost
// (ECDSA P-256, one day) into dir as controller-runtime's tls.crt and tls.key, with the CA as
// ca.crt, and returns a pool trusting only that CA, as a webhook configuration's caBundle would.
func writeCertificates(dir string) (*x509.CertPool, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sidecarops-loadgen CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool, nil
}
