package webhook

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTLSOptions(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{}
	TLSOptions(false)(srv.TLS)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	for _, tc := range []struct {
		name  string
		cfg   *tls.Config
		fails bool
	}{
		{name: "TLS 1.3", cfg: &tls.Config{MinVersion: tls.VersionTLS13}},
		{name: "TLS 1.2 AES-GCM", cfg: &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}},
		{name: "TLS 1.2 ChaCha20-Poly1305", cfg: &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}}},
		{name: "TLS 1.2 CBC with SHA-1", cfg: &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}}, fails: true},
		{name: "TLS 1.1", cfg: &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg.Clone()
			cfg.RootCAs = pool
			cfg.ServerName = "example.com" // httptest's certificate names example.com and 127.0.0.1
			cfg.NextProtos = []string{"h2", "http/1.1"}
			conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), cfg)
			if tc.fails {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			defer conn.Close()
			assert.Equal(t, "http/1.1", conn.ConnectionState().NegotiatedProtocol, "HTTP/2 is off unless asked for")
		})
	}
}
