package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/sidecarops/sidecarops/webhook"
)

// webhookTimeout is the pod webhook configuration's timeoutSeconds (config/): an answer slower
// than this fails the API server's call, so it is an error here too.
const webhookTimeout = 3 * time.Second

// targetURL parses --url. Only https to a loopback address is accepted: this tool generates load,
// and this workplace allows no traffic beyond the machine. The dialer enforces the same on every
// connection (loopbackOnly), so a name resolving elsewhere or a redirect cannot get around it.
// A URL without a path targets the pod webhook's path.
func targetURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("--url %q: the webhook is served over https, not %q", raw, u.Scheme)
	}
	if u.Port() == "" {
		return nil, fmt.Errorf("--url %q: give the port (the manager's --webhook-port, 9443 by default)", raw)
	}
	if !loopbackHost(u.Hostname()) {
		return nil, fmt.Errorf("--url %q: only loopback hosts (127.0.0.0/8, ::1, localhost) are allowed", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = webhook.PodPath
	}
	return u, nil
}

// loopbackHost tells whether host names the loopback interface: an IP literal in 127.0.0.0/8 or
// ::1 (IPv4-mapped included), or localhost. Other names are refused rather than resolved.
func loopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// loopbackOnly is the dialer's Control hook: it sees the resolved address of every connection the
// client opens and refuses any that is not loopback.
func loopbackOnly(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		return fmt.Errorf("refusing to connect to %s: loopback only", address)
	}
	return nil
}

// clientOptions configure the HTTP client.
type clientOptions struct {
	pool       *x509.CertPool // nil: the system's roots
	serverName string         // TLS server name when the certificate does not name the URL's host
	http2      bool           // HTTP/2 only, as the API server calls webhooks; else HTTP/1.1 only
	conns      int            // idle connections kept (HTTP/1.1: one per worker)
}

// newClient is a keep-alive HTTPS client that trusts opts.pool, never uses a proxy from the
// environment (the traffic must stay on loopback), never follows a redirect (a webhook answers
// 200, anything else is an error) and counts the connections it opens into dials.
func newClient(opts clientOptions, dials *atomic.Int64) *http.Client {
	dialer := &net.Dialer{
		Timeout: webhookTimeout,
		Control: func(network, address string, c syscall.RawConn) error {
			if err := loopbackOnly(network, address, c); err != nil {
				return err
			}
			dials.Add(1)
			return nil
		},
	}
	protocols := new(http.Protocols)
	if opts.http2 {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetHTTP1(true)
	}
	tr := &http.Transport{
		Proxy:               nil, // not even from the environment: the traffic stays on loopback
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: opts.pool, ServerName: opts.serverName, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: webhookTimeout,
		Protocols:           protocols,
		MaxIdleConns:        opts.conns,
		MaxIdleConnsPerHost: opts.conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       webhookTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Kinds of failed admissions, each counted apart.
const (
	failTransport = "transport" // connection, TLS, timeout (> webhookTimeout)
	failStatus    = "http-status"
	failDecode    = "decode"
	failUID       = "uid"    // no response, or another request's uid
	failDenied    = "denied" // allowed: false
	failPatch     = "patch"  // a patch missing when a SidecarSet matches, or present when none does
)

// failure is a failed admission: its kind and what was seen.
type failure struct {
	kind string
	err  error
}

func (f *failure) Error() string { return f.kind + ": " + f.err.Error() }

func fail(kind string, format string, args ...any) *failure {
	return &failure{kind: kind, err: fmt.Errorf(format, args...)}
}

// worker posts AdmissionReviews one at a time: the body marshalled once, copied and stamped with
// a fresh uid per request.
type worker struct {
	id          uint32
	seq         uint64
	client      *http.Client
	url         string
	body        []byte
	uidAt       []int
	expectPatch bool
	resp        bytes.Buffer
}

// newWorker is a worker posting body, whose request uid (and distinctLabel's value) is at uidAt,
// to url.
func newWorker(id uint32, client *http.Client, url string, body []byte, uidAt []int, expectPatch bool) *worker {
	return &worker{id: id, client: client, url: url, body: body, uidAt: uidAt, expectPatch: expectPatch}
}

// answer is one checked admission.
type answer struct {
	rtt      time.Duration // from sending the request to the last byte of the response read
	end      time.Time
	response *admissionv1.AdmissionResponse
	proto    string
	tls      uint16
}

// next is the body of the worker's next request, with a fresh uid, and that uid.
func (w *worker) next() (body, uid []byte) {
	// A copy per request: the transport may hold the body after the response (RoundTrip may close
	// it later), so the buffer of one request is never reused for the next.
	body = make([]byte, len(w.body))
	copy(body, w.body)
	w.seq++
	for _, at := range w.uidAt {
		stampUID(body[at:at+len(uidTemplate)], w.id, w.seq)
	}
	return body, body[w.uidAt[0] : w.uidAt[0]+len(uidTemplate)]
}

// do posts one AdmissionReview and checks the answer: status 200, an AdmissionReview with a
// response for this request's uid, allowed, and a JSON patch exactly when a SidecarSet matches.
// The latency stops when the response body has been read; the check is not timed.
func (w *worker) do(ctx context.Context) (answer, error) {
	body, uid := w.next()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return answer{}, fail(failTransport, "%w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := w.client.Do(req)
	if err != nil {
		return answer{}, fail(failTransport, "%w", err)
	}
	w.resp.Reset()
	_, err = w.resp.ReadFrom(resp.Body)
	err = errors.Join(err, resp.Body.Close())
	end := time.Now()
	if err != nil {
		return answer{}, fail(failTransport, "reading the response: %w", err)
	}
	a := answer{rtt: end.Sub(start), end: end, proto: resp.Proto}
	if resp.TLS != nil {
		a.tls = resp.TLS.Version
	}
	if resp.StatusCode != http.StatusOK {
		return a, fail(failStatus, "%s: %.200s", resp.Status, w.resp.Bytes())
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(w.resp.Bytes(), &review); err != nil {
		return a, fail(failDecode, "%w: %.200s", err, w.resp.Bytes())
	}
	r := review.Response
	if r == nil || string(r.UID) != string(uid) {
		return a, fail(failUID, "answer for uid %q, sent %q", responseUID(r), uid)
	}
	if !r.Allowed {
		return a, fail(failDenied, "%+v", r.Result)
	}
	hasPatch := len(r.Patch) > 0 && r.PatchType != nil && *r.PatchType == admissionv1.PatchTypeJSONPatch
	if hasPatch != w.expectPatch {
		return a, fail(failPatch, "JSON patch present: %v, expected: %v (patch type %v, %d bytes)", hasPatch, w.expectPatch, r.PatchType, len(r.Patch))
	}
	a.response = r
	return a, nil
}

func responseUID(r *admissionv1.AdmissionResponse) string {
	if r == nil {
		return "(no response)"
	}
	return string(r.UID)
}
