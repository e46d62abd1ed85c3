package e2e

import (
	"net"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// deadURL is u with its port replaced by one nothing listens on.
func deadURL(t *testing.T, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	parsed.Host = addr
	return parsed.String()
}
