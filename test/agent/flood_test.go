package agent

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/agent/agenttest"
)

// Issue 28: a flood of made-up tokens from one address, on many connections, while callers at
// another address present valid tokens the agent has never seen, against a real API server.
// Before, every new token queued in client-go's rate limiter behind the flood: a fresh valid
// token took seconds, then timed out with 503, like the flood, and each 503 logged an ERROR line.
// Now the flood is answered 429 at once, fresh valid tokens are reviewed at once, and nothing
// fails. SIDECAROPS_FLOOD_SECONDS makes the flood longer (docs/benchmarks.md).
func TestAPIUnderFloodOfMadeUpTokens(t *testing.T) {
	const connections, reviewTimeout = 100, 10 * time.Second
	floodFor := floodDuration(t, 5*time.Second)
	ns := namespace(t)
	sa := agentIdentity(t, ns)
	pod(t, ns, "game-0", nil)
	operator := caller(t, ns, "game-operator", true)
	// A new caller a second during the flood, and a few before it.
	fresh := make([]string, int(floodFor/time.Second)+3)
	for i := range fresh {
		fresh[i] = token(t, ns, "game-operator", "sidecar-agent")
	}
	var lines agenttest.LogLines
	api := startAgentLogging(t, sa, ns, "game-0", "plugins: []\n", operator, logr.New(&lines))
	// Each valid caller comes from a loopback address of its own, the flood from 127.0.0.1.
	from := func(i int) *http.Client { return clientFrom(net.IPv4(127, 0, 1, byte(i))) }
	status := func(c *http.Client, token string) (int, time.Duration) { return api.status(t, c, token) }

	var quiet []time.Duration
	for i, tok := range fresh[:3] {
		code, took := status(from(i), tok)
		require.Equal(t, http.StatusOK, code)
		quiet = append(quiet, took)
	}

	deadline := time.Now().Add(floodFor)
	flooding := api.flood(t, connections, func(int) net.IP { return net.IPv4(127, 0, 0, 1) }, deadline)
	var during []time.Duration
	allowed := 0
	for i, tok := range fresh[3:] {
		time.Sleep(time.Until(deadline) / time.Duration(len(fresh)-len(during)-2))
		code, took := status(from(3+i), tok)
		if assert.Equal(t, http.StatusOK, code, "a fresh valid token during the flood") {
			allowed++
		}
		during = append(during, took)
	}
	flood, total := flooding()

	slices.Sort(quiet)
	slices.Sort(during)
	t.Logf("flood: %d requests in %v on %d connections: %d answered 401, %d answered 429, %d answered 503; "+
		"fresh valid tokens: before the flood %v (median of %d), during it median %v, max %v (%d of %d answered 200); ERROR lines: %d",
		total, floodFor, connections, flood[http.StatusUnauthorized], flood[http.StatusTooManyRequests], flood[http.StatusServiceUnavailable],
		quiet[len(quiet)/2], len(quiet), during[len(during)/2], during[len(during)-1], allowed, len(during), lines.Errors.Load())
	assert.Positive(t, flood[http.StatusTooManyRequests], "the flood is throttled")
	assert.Equal(t, total, flood[http.StatusUnauthorized]+flood[http.StatusTooManyRequests], "the flood is refused, never failed: %v", flood)
	assert.Less(t, during[len(during)-1], reviewTimeout)
	assert.Zero(t, lines.Errors.Load(), "ERROR lines")
}

// madeUpJWT is a token of a JWT's shape (header.payload.signature, base64url) signed by nobody.
func madeUpJWT(t *testing.T) string {
	b := make([]byte, 96)
	_, err := rand.Read(b)
	require.NoError(t, err)
	enc := base64.RawURLEncoding
	return fmt.Sprintf("%s.%s.%s", enc.EncodeToString([]byte(`{"alg":"RS256","kid":"made-up"}`)), enc.EncodeToString(b[:48]), enc.EncodeToString(b[48:]))
}

// floodDuration is how long a flood lasts: def, or SIDECAROPS_FLOOD_SECONDS seconds
// (docs/benchmarks.md).
func floodDuration(t *testing.T, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv("SIDECAROPS_FLOOD_SECONDS")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "SIDECAROPS_FLOOD_SECONDS")
	return time.Duration(n) * time.Second
}

// flood sends made-up tokens to /status on connections, connection i from the address from(i),
// until deadline; wait waits for its end and says how many answers of each status code it had, and
// in all.
func (a agentAPI) flood(t *testing.T, connections int, from func(i int) net.IP, deadline time.Time) (wait func() (codes map[int]int, total int)) {
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range connections {
		wg.Go(func() {
			c := clientFrom(from(i))
			defer c.CloseIdleConnections()
			seen := map[int]int{}
			for time.Now().Before(deadline) {
				code, _ := a.status(t, c, madeUpJWT(t))
				seen[code]++
			}
			mu.Lock()
			defer mu.Unlock()
			for code, n := range seen {
				codes[code] += n
			}
		})
	}
	return func() (map[int]int, int) {
		wg.Wait()
		total := 0
		for _, n := range codes {
			total += n
		}
		return codes, total
	}
}
