package manager

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The profiles have no authentication: only a loopback address serves them.
func TestLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		addr, want, err string
	}{
		{"", "", ""},
		{"0", "", ""},
		{"127.0.0.1:6060", "127.0.0.1:6060", ""},
		{"[::1]:6060", "[::1]:6060", ""},
		{"localhost:6060", "localhost:6060", ""},
		{":6060", "", "must be a loopback address"},
		{"0.0.0.0:6060", "", "must be a loopback address"},
		{"10.0.0.7:6060", "", "must be a loopback address"},
		{"pods.example.com:6060", "", "must be a loopback address"},
		{"6060", "", "missing port"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			got, err := loopbackOnly(tc.addr)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.Contains(t, err.Error(), "--pprof-bind-address")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
