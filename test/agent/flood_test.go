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
	floodFor := 5 * time.Second
	if s := os.Getenv("SIDECAROPS_FLOOD_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "SIDECAROPS_FLOOD_SECONDS")
		floodFor = time.Duration(n) * time.Second
	}
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
	from := func(i int) *http.Client {
		return &http.Client{Timeout: 2 * reviewTimeout, Transport: &http.Transport{
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(i))}}).DialContext}}
	}
	status := func(c *http.Client, token string) (int, time.Duration) {
		req, err := http.NewRequest(http.MethodGet, api.base+"/status", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := c.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}

	var quiet []time.Duration
	for i, tok := range fresh[:3] {
		code, took := status(from(i), tok)
		require.Equal(t, http.StatusOK, code)
		quiet = append(quiet, took)
	}

	var mu sync.Mutex
	flood := map[int]int{}
	deadline := time.Now().Add(floodFor)
	var wg sync.WaitGroup
	for range connections {
		wg.Go(func() {
			c := &http.Client{Timeout: 2 * reviewTimeout, Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			seen := map[int]int{}
			for time.Now().Before(deadline) {
				code, _ := status(c, madeUpJWT(t))
				seen[code]++
			}
			mu.Lock()
			defer mu.Unlock()
			for code, n := range seen {
				flood[code] += n
			}
		})
	}
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
	wg.Wait()

	total := 0
	for _, n := range flood {
		total += n
	}
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
