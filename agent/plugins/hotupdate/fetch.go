package hotupdate

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Reasons of sidecar_agent_plugin_refused_total{plugin="hot_update"}.
const (
	reasonURLNotAllowed         = "url_not_allowed"
	reasonRedirect              = "redirect"
	reasonPrivateAddress        = "private_address"
	reasonTooLarge              = "too_large"
	reasonChecksumMismatch      = "checksum_mismatch"
	reasonRecordUnauthenticated = "record_unauthenticated"
	reasonRecordNotAllowed      = "record_not_allowed"
)

// maxRedirects is net/http's own bound, kept when redirects are allowed.
const maxRedirects = 10

// parsePrefix reads an allowedURLPrefixes entry. It must be an absolute http(s) URL without
// credentials, query or fragment, whose path (default "/") has no dot segments: what a request's URL
// is compared with must mean what it says.
func parsePrefix(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("must be an absolute http:// or https:// URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https", u.Hostname() == "", u.Opaque != "":
		return nil, errors.New("must be an absolute http:// or https:// URL")
	case u.User != nil:
		return nil, errors.New("must not carry credentials")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("must not have a query or fragment: a prefix matches scheme, host and path")
	}
	if u.Path == "" {
		u.Path = "/"
	}
	if err := cleanPath(u.Path); err != nil {
		return nil, err
	}
	return u, nil
}

// cleanPath refuses the paths a file server may resolve outside a prefix that they textually start
// with: "." and ".." segments (encoded ones too: p is decoded) and backslashes, which some servers
// take for slashes.
func cleanPath(p string) error {
	if strings.Contains(p, `\`) {
		return errors.New(`path must not contain "\"`)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return errors.New(`path must not contain "." or ".." segments`)
		}
	}
	return nil
}

// hostPort is u's host in the form prefixes are compared by: lower case, with the scheme's port
// when none is given.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// allowList is allowedURLPrefixes, parsed.
type allowList []*url.URL

// check is nil when u may be downloaded: u has a prefix's scheme and host and its path starts with
// the prefix's path. It is asked of the requested URL and of every redirect.
func (l allowList) check(u *url.URL) error {
	refuse := func(format string, a ...any) error {
		return &failure{code: http.StatusForbidden, reason: reasonURLNotAllowed, err: fmt.Errorf(format, a...)}
	}
	if len(l) == 0 {
		return refuse("url %s is not allowed: allowedURLPrefixes is empty, so no URL is", u.Redacted())
	}
	if u.User != nil {
		return refuse("url %s is not allowed: it carries credentials", u.Redacted())
	}
	if err := cleanPath(u.Path); err != nil {
		return refuse("url %s is not allowed: %w", u.Redacted(), err)
	}
	p := u.Path
	if p == "" {
		p = "/"
	}
	for _, pre := range l {
		if u.Scheme == pre.Scheme && hostPort(u) == hostPort(pre) && strings.HasPrefix(p, pre.Path) {
			return nil
		}
	}
	return refuse("url %s is not allowed: it starts with none of allowedURLPrefixes", u.Redacted())
}

// newClient is the client downloads are made with. Redirects are refused unless allowRedirects,
// and then each hop is checked against allowed again. Unless allowPrivate, every connection is
// refused whose address is not public (publicOnly); the check runs on the address being dialled,
// after name resolution, so a name resolving (or re-resolving: DNS rebinding) to one is refused
// too. No proxy is used, even if the environment names one: the agent would dial the proxy, and
// could not check the address the proxy connects to. resolver is nil but in tests.
func newClient(timeout time.Duration, allowed allowList, allowRedirects, allowPrivate bool, resolver *net.Resolver) *http.Client {
	dialer := &net.Dialer{Timeout: 30 * time.Second, Resolver: resolver}
	if !allowPrivate {
		dialer.Control = publicOnly
	}
	return &http.Client{
		Timeout: timeout,
		// http.DefaultTransport's settings, but for Proxy and the dialer.
		Transport: &http.Transport{
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if !allowRedirects {
				return &failure{code: http.StatusForbidden, reason: reasonRedirect,
					err: fmt.Errorf("redirect to %s refused: allowRedirects is false", req.URL.Redacted())}
			}
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return allowed.check(req.URL)
		},
	}
}

// publicOnly is a net.Dialer Control refusing connections to addresses that are not public.
func publicOnly(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &failure{code: http.StatusForbidden, reason: reasonPrivateAddress, err: fmt.Errorf("address %q: %w", address, err)}
	}
	if what := nonPublic(ap.Addr()); what != "" {
		return &failure{code: http.StatusForbidden, reason: reasonPrivateAddress,
			err: fmt.Errorf("address %s is %s; set allowPrivateNetworks to download from it", ap.Addr(), what)}
	}
	return nil
}

// nonPublicPrefixes are the special-purpose ranges (RFC 6890 and successors) that netip.Addr's
// predicates do not cover and a download has no business reaching.
var nonPublicPrefixes = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network" (0.0.0.0/8, which Linux dials as the local host)`},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (100.64.0.0/10: carrier-grade NAT, some clouds' metadata service)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments (192.0.0.0/24)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking (198.18.0.0/15)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (240.0.0.0/4, broadcast)"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (::/96)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64 (64:ff9b:1::/48)"},
	{netip.MustParsePrefix("fec0::/10"), "site-local (fec0::/10)"},
}

// nat64 embeds an IPv4 address in its last 32 bits; the embedded address decides.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// nonPublic says what kind of non-public address ip is, "" for a public one.
func nonPublic(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local (the cloud metadata address 169.254.169.254 is one)"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast():
		return "multicast"
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		return nonPublic(netip.AddrFrom4([4]byte(b[12:])))
	}
	for _, p := range nonPublicPrefixes {
		if p.prefix.Contains(ip) {
			return p.what
		}
	}
	return ""
}
