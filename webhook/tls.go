package webhook

import "crypto/tls"

// aeadSuites are the TLS 1.2 cipher suites the webhook server accepts: ECDHE key exchange with an
// AEAD cipher only. Go's defaults also accept CBC suites with SHA-1 MACs, which have no place on a
// port the API server alone needs to reach; TLS 1.3 suites are not configurable and all AEAD.
var aeadSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// TLSOptions configures the webhook server's TLS: TLS 1.2 or later, AEAD cipher suites only, and
// HTTP/1.1 only unless http2 (HTTP/2's stream multiplexing has a history of resource-exhaustion
// attacks, CVE-2023-44487, and the API server does not need it). The manager and the load
// generator's server both use it.
func TLSOptions(http2 bool) func(*tls.Config) {
	return func(c *tls.Config) {
		c.MinVersion = tls.VersionTLS12
		c.CipherSuites = aeadSuites
		if !http2 {
			c.NextProtos = []string{"http/1.1"}
		}
	}
}
