package hotupdate

import (
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/agent/agenttest"
)

// counted is a file server on 127.0.0.1 counting the requests it gets; /redirect?to=URL redirects.
func counted(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		switch r.URL.Path {
		case "/v2/game.cfg":
			_, _ = w.Write([]byte("max_players=64\n"))
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		case "/stream/game.cfg":
			// No Content-Length: the size is known only by reading.
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte("0123456789"))
		case "/declared/game.cfg":
			// Says it is large, then sends nothing: only the declared length tells.
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// Before, hot_update downloaded any URL from anywhere, followed redirects to other ports and
// reached loopback; each case fails against that.
func TestDownloadPolicy(t *testing.T) {
	srv, hits := counted(t)
	other, otherHits := counted(t)
	rec := agenttest.StartSignalRecorder(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	localhost := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	tests := []struct {
		name         string
		allowed      []string
		private      bool // allowPrivateNetworks
		redirects    bool // allowRedirects
		maxBytes     int64
		url          string
		code         int
		message      string
		refused      []string // Refused reasons
		hits, others int32    // requests the servers got
	}{
		{name: "loopback refused by default", allowed: []string{srv.URL + "/"}, url: srv.URL + "/v2/game.cfg",
			code: 403, message: "address 127.0.0.1 is loopback; set allowPrivateNetworks", refused: []string{"private_address"}},
		{name: "a name resolving to loopback refused", allowed: []string{localhost + "/"}, url: localhost + "/v2/game.cfg",
			code: 403, message: "is loopback", refused: []string{"private_address"}},
		{name: "loopback with allowPrivateNetworks", allowed: []string{srv.URL + "/"}, private: true, url: srv.URL + "/v2/game.cfg",
			code: 200, message: "applied", hits: 1},
		{name: "nothing allowed without allowedURLPrefixes", private: true, url: srv.URL + "/v2/game.cfg",
			code: 403, message: "allowedURLPrefixes is empty", refused: []string{"url_not_allowed"}},
		{name: "outside the prefix's path", allowed: []string{srv.URL + "/v1/"}, private: true, url: srv.URL + "/v2/game.cfg",
			code: 403, message: "starts with none of allowedURLPrefixes", refused: []string{"url_not_allowed"}},
		{name: "another port of the same host", allowed: []string{srv.URL + "/"}, private: true, url: other.URL + "/v2/game.cfg",
			code: 403, message: "starts with none", refused: []string{"url_not_allowed"}},
		{name: "dot segments leave the prefix", allowed: []string{srv.URL + "/v1/"}, private: true, url: srv.URL + "/v1/../v2/game.cfg",
			code: 403, message: `must not contain "." or ".." segments`, refused: []string{"url_not_allowed"}},
		{name: "encoded dot segments too", allowed: []string{srv.URL + "/v1/"}, private: true, url: srv.URL + "/v1/%2e%2e/v2/game.cfg",
			code: 403, message: `".." segments`, refused: []string{"url_not_allowed"}},
		{name: "a host that only starts like the allowed one", allowed: []string{"http://127.0.0.1/"}, private: true, url: srv.URL + "/v2/game.cfg",
			code: 403, message: "starts with none", refused: []string{"url_not_allowed"}},
		{name: "redirect refused by default", allowed: []string{srv.URL + "/"}, private: true, url: srv.URL + "/redirect?to=/v2/game.cfg",
			code: 403, message: "redirect to " + srv.URL + "/v2/game.cfg refused: allowRedirects is false", refused: []string{"redirect"}, hits: 1},
		{name: "redirect allowed within the list", allowed: []string{srv.URL + "/"}, private: true, redirects: true,
			url: srv.URL + "/redirect?to=/v2/game.cfg", code: 200, message: "applied", hits: 2},
		// Each hop is checked again: the other port is not in the list.
		{name: "allowed redirect to another port", allowed: []string{srv.URL + "/"}, private: true, redirects: true,
			url: srv.URL + "/redirect?to=" + other.URL + "/v2/game.cfg", code: 403, message: "starts with none", refused: []string{"url_not_allowed"}, hits: 1},
		{name: "streamed past maxBytes", allowed: []string{srv.URL + "/"}, private: true, maxBytes: 8, url: srv.URL + "/stream/game.cfg",
			code: 502, message: "larger than maxBytes 8", refused: []string{"too_large"}, hits: 1},
		{name: "exactly maxBytes", allowed: []string{srv.URL + "/"}, private: true, maxBytes: 10, url: srv.URL + "/stream/game.cfg",
			code: 200, message: "applied", hits: 1},
		// Refused on the declared length, without waiting for a body (the download timeout is 1s).
		{name: "declared larger than maxBytes", allowed: []string{srv.URL + "/"}, private: true, maxBytes: 8, url: srv.URL + "/declared/game.cfg",
			code: 502, message: "larger than maxBytes 8", refused: []string{"too_large"}, hits: 1},
	}
	require.NotZero(t, port)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits.Store(0)
			otherHits.Store(0)
			cfg := config(t.TempDir(), rec.Name, tt.allowed...)
			cfg.AllowPrivateNetworks, cfg.AllowRedirects, cfg.MaxBytes = tt.private, tt.redirects, tt.maxBytes
			p, host, dir := startedWith(t, cfg, &agenttest.Host{T: t})
			res, code := p.Update(context.Background(), "alice", Request{URL: tt.url, Version: "v2", FileName: "game.cfg"})
			assert.Equal(t, tt.code, code, res.Message)
			assert.Contains(t, res.Message, tt.message)
			assert.Equal(t, tt.refused, host.Refusals())
			assert.Equal(t, tt.hits, hits.Load(), "requests to the allowed server")
			assert.Equal(t, tt.others, otherHits.Load(), "requests to the other server")
			if code != 200 {
				got, err := os.ReadFile(filepath.Join(dir, "game.cfg"))
				require.NoError(t, err)
				assert.Equal(t, "max_players=32\n", string(got), "the old file stays")
			}
		})
	}
}

func TestAllowedURLPrefixesValidation(t *testing.T) {
	for _, tc := range []struct {
		prefix, err string
	}{
		{"https://files.example.com/game/", ""},
		{"http://10.0.0.5:8080", ""},
		{"files.example.com/game/", "must be an absolute http:// or https:// URL"},
		{"ftp://files.example.com/", "must be an absolute http:// or https:// URL"},
		{"https:///game/", "must be an absolute http:// or https:// URL"},
		{"https://user:secret@files.example.com/", "must not carry credentials"},
		{"https://files.example.com/game/?v=1", "must not have a query or fragment"},
		{"https://files.example.com/game/#x", "must not have a query or fragment"},
		{"https://files.example.com/game/../", `must not contain "." or ".." segments`},
		{`https://files.example.com/game\`, `must not contain "\"`},
		{"https://files example.com/", "must be an absolute http:// or https:// URL"},
	} {
		c := config("/data", "game", tc.prefix)
		errs := c.Validate(field.NewPath("config"))
		if tc.err == "" {
			assert.Empty(t, errs, tc.prefix)
			continue
		}
		require.Len(t, errs, 1, tc.prefix)
		assert.Equal(t, "config.allowedURLPrefixes[0]", errs[0].Field)
		assert.Contains(t, errs[0].Error(), tc.err, tc.prefix)
	}
}

// The addresses a forged URL would aim at are refused at dial time, whatever name led there.
func TestPublicOnly(t *testing.T) {
	for _, tc := range []struct {
		addr, what string // what: "" for allowed
	}{
		{"169.254.169.254:80", "link-local (the cloud metadata address"},
		{"[fd00::1]:443", "private"},
		{"[fd00:ec2::254]:80", "private"},
		{"[::1]:80", "loopback"},
		{"127.0.0.1:80", "loopback"},
		{"127.1.2.3:80", "loopback"},
		{"10.0.0.1:80", "private"},
		{"10.255.255.255:80", "private"},
		{"172.16.0.1:80", "private"},
		{"172.31.255.255:80", "private"},
		{"192.168.0.1:80", "private"},
		{"0.0.0.0:80", "unspecified"},
		{"0.1.2.3:80", `"this network"`},
		{"[::]:80", "unspecified"},
		{"[::ffff:10.0.0.1]:80", "private"},
		{"[::ffff:169.254.169.254]:80", "link-local"},
		{"[64:ff9b::a9fe:a9fe]:80", "link-local"}, // 169.254.169.254 through NAT64
		{"[fe80::1%25eth0]:80", "link-local"},
		{"[fe80::1]:80", "link-local"},
		{"100.100.100.200:80", "shared address space"},
		{"224.0.0.1:80", "multicast"},
		{"255.255.255.255:80", "reserved"},
		{"[::10.0.0.1]:80", "IPv4-compatible"},
		{"not-an-address:80", "not-an-address"},
		{"8.8.8.8:443", ""},
		{"172.32.0.1:80", ""},
		{"192.169.0.1:80", ""},
		{"[2001:4860:4860::8888]:443", ""},
		{"[64:ff9b::808:808]:443", ""}, // 8.8.8.8 through NAT64
	} {
		addr := strings.Replace(tc.addr, "%25", "%", 1)
		err := publicOnly("tcp", addr, nil)
		if tc.what == "" {
			assert.NoError(t, err, addr)
			continue
		}
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), tc.what, addr)
		var f *failure
		require.ErrorAs(t, err, &f, addr)
		assert.Equal(t, http.StatusForbidden, f.code)
		assert.Equal(t, reasonPrivateAddress, f.reason)
	}
}

// A name is checked by the address it resolves to when the connection is made, so neither a name
// pointing at the metadata service nor one re-pointed after a check (DNS rebinding) gets through.
func TestNamesResolvingToNonPublicAddresses(t *testing.T) {
	rec := agenttest.StartSignalRecorder(t)
	resolver := fakeDNS(t, map[string][]string{
		"metadata.test": {"169.254.169.254"},
		"ten.test":      {"10.1.2.3"},
		"sixteen.test":  {"172.16.9.9"},
		"home.test":     {"192.168.1.10"},
		"ula.test":      {"fd00::5"},
		"six.test":      {"::1"},
		"mixed.test":    {"10.0.0.1", "fd00::1"},
	})
	for _, tc := range []struct{ name, what string }{
		{"metadata.test", "169.254.169.254 is link-local"},
		{"ten.test", "10.1.2.3 is private"},
		{"sixteen.test", "172.16.9.9 is private"},
		{"home.test", "192.168.1.10 is private"},
		{"ula.test", "fd00::5 is private"},
		{"six.test", "::1 is loopback"},
		{"mixed.test", "is private"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := "http://" + tc.name + "/game.cfg"
			cfg := config(t.TempDir(), rec.Name, "http://"+tc.name+"/")
			cfg.AllowPrivateNetworks = false
			p, host, dir := startedWith(t, cfg, &agenttest.Host{T: t})
			p.client = newClient(time.Second, p.allowed, false, false, resolver)
			res, code := p.Update(context.Background(), "alice", Request{URL: url, Version: "v2"})
			assert.Equal(t, http.StatusForbidden, code, res.Message)
			assert.Contains(t, res.Message, tc.what)
			assert.Equal(t, []string{"private_address"}, host.Refusals())
			got, err := os.ReadFile(filepath.Join(dir, "game.cfg"))
			require.NoError(t, err)
			assert.Equal(t, "max_players=32\n", string(got))
		})
	}
}

// fakeDNS is a resolver asking a DNS server on 127.0.0.1 that answers A and AAAA queries for the
// names given (and those names with any search domain appended) with the addresses given.
func fakeDNS(t *testing.T, answers map[string][]string) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := dnsAnswer(buf[:n], answers); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// dnsAnswer answers a one-question DNS query (RFC 1035 §4) from answers, nil when q is not one.
func dnsAnswer(q []byte, answers map[string][]string) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil
	}
	var labels []string
	i := 12
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return nil
		}
		labels = append(labels, strings.ToLower(string(q[i+1:i+1+l])))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1:])
	question := q[12 : i+5]
	name := strings.Join(labels, ".")
	var addrs []string
	for n, a := range answers {
		if name == n || strings.HasPrefix(name, n+".") {
			addrs = a
		}
	}
	var records [][]byte
	for _, a := range addrs {
		ip := netip.MustParseAddr(a)
		if (qtype == 1) != ip.Is4() || (qtype != 1 && qtype != 28) {
			continue
		}
		rdata := ip.AsSlice()
		rr := []byte{0xc0, 12, 0, byte(qtype), 0, 1, 0, 0, 0, 1, 0, byte(len(rdata))}
		records = append(records, append(rr, rdata...))
	}
	resp := make([]byte, 12, 512)
	copy(resp, q[:2])                                          // ID
	binary.BigEndian.PutUint16(resp[2:], 0x8180)               // response, recursion desired and available, no error
	binary.BigEndian.PutUint16(resp[4:], 1)                    // one question
	binary.BigEndian.PutUint16(resp[6:], uint16(len(records))) // answers
	resp = append(resp, question...)
	for _, r := range records {
		resp = append(resp, r...)
	}
	return resp
}
