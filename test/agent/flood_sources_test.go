package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecarops/sidecarops/agent/agenttest"
	"github.com/sidecarops/sidecarops/internal/kubeauth"
)

// Issue 35: made-up tokens from six addresses (what six pods can send) spent the agent's one
// allowance of reviews, and then every fresh valid token from a seventh address was answered 429, a
// known caller too once its answer expired, and twenty concurrent first requests with one new token
// cost up to twenty TokenReviews and were all answered 429. Now, against a real API server, a flood
// from eight addresses leaves every fresh valid token from another address, every request of a known
// caller and every one of twenty concurrent first requests answered 200, the twenty with one
// TokenReview, and the API server is asked no more than kubeauth.DefaultLimits allow.
// SIDECAROPS_FLOOD_SECONDS makes the flood longer: past a minute, the known caller's answer would
// have expired during it.
func TestAPIUnderFloodFromManyAddresses(t *testing.T) {
	const (
		addresses, perAddress = 8, 10 // the flood's: connections from each
		atOnce                = 20
		reviewTimeout         = 10 * time.Second
	)
	floodFor := floodDuration(t, 10*time.Second)
	ns := namespace(t)
	sa := agentIdentity(t, ns)
	pod(t, ns, "game-0", nil)
	operator := caller(t, ns, "game-operator", true)
	// A new caller every two seconds (two reviews each, what one address may ask a second), all
	// from one address; and two tokens each sent by twenty requests at once.
	fresh := make([]string, int(floodFor/(2*time.Second))+1)
	for i := range fresh {
		fresh[i] = token(t, ns, "game-operator", "sidecar-agent")
	}
	bursts := []string{token(t, ns, "game-operator", "sidecar-agent"), token(t, ns, "game-operator", "sidecar-agent")}
	var lines agenttest.LogLines
	api := startAgentLogging(t, sa, ns, "game-0", "plugins: []\n", operator, logr.New(&lines))
	newcomer, known, burster := clientFrom(net.IPv4(127, 0, 2, 1)), clientFrom(net.IPv4(127, 0, 2, 2)), clientFrom(net.IPv4(127, 0, 2, 3))
	burst := func(token string) []int {
		codes := make([]int, atOnce)
		var wg sync.WaitGroup
		for i := range atOnce {
			wg.Go(func() { codes[i], _ = api.status(t, burster, token) })
		}
		wg.Wait()
		return codes
	}
	all := func(code, n int) []int { return slices.Repeat([]int{code}, n) }

	before := reviewsAsked(t)
	assert.Equal(t, all(http.StatusOK, atOnce), burst(bursts[0]), "twenty first requests with one new token")
	asked := reviewsAsked(t)
	assert.Equal(t, 1.0, asked["tokenreviews"]-before["tokenreviews"], "TokenReviews of twenty first requests with one new token")
	code, _ := api.status(t, known, operator)
	require.Equal(t, http.StatusOK, code, "the known caller before the flood")

	start := time.Now()
	deadline := start.Add(floodFor)
	flooding := api.flood(t, addresses*perAddress, func(i int) net.IP { return net.IPv4(127, 0, 3, byte(i%addresses+1)) }, deadline)
	var freshCodes, knownCodes []int
	var took []time.Duration
	var burstCodes []int
	for i, tok := range fresh {
		time.Sleep(time.Until(start.Add(time.Duration(i)*2*time.Second + time.Second)))
		code, d := api.status(t, newcomer, tok)
		freshCodes = append(freshCodes, code)
		took = append(took, d)
		code, _ = api.status(t, known, operator)
		knownCodes = append(knownCodes, code)
		if i == len(fresh)/2 {
			burstCodes = burst(bursts[1])
		}
	}
	flood, total := flooding()
	elapsed := time.Since(start)
	after := reviewsAsked(t)

	slices.Sort(took)
	reviews := after["tokenreviews"] + after["localsubjectaccessreviews"] - asked["tokenreviews"] - asked["localsubjectaccessreviews"]
	t.Logf("flood: %d requests in %v from %d addresses on %d connections: %d answered 401, %d answered 429, %d answered 503; "+
		"fresh valid tokens from another address: %d of %d answered 200, median %v, max %v; known caller: %d of %d answered 200; "+
		"twenty first requests with one new token: %d of %d answered 200 during the flood; API server asked %.0f TokenReviews and %.0f LocalSubjectAccessReviews (%.1f a second); ERROR lines: %d",
		total, elapsed.Round(time.Millisecond), addresses, addresses*perAddress, flood[http.StatusUnauthorized], flood[http.StatusTooManyRequests], flood[http.StatusServiceUnavailable],
		count(freshCodes, http.StatusOK), len(freshCodes), took[len(took)/2], took[len(took)-1], count(knownCodes, http.StatusOK), len(knownCodes),
		count(burstCodes, http.StatusOK), len(burstCodes), after["tokenreviews"]-asked["tokenreviews"], after["localsubjectaccessreviews"]-asked["localsubjectaccessreviews"],
		reviews/elapsed.Seconds(), lines.Errors.Load())
	assert.Equal(t, all(http.StatusOK, len(fresh)), freshCodes, "fresh valid tokens from another address")
	assert.Less(t, took[len(took)-1], reviewTimeout)
	assert.Equal(t, all(http.StatusOK, len(fresh)), knownCodes, "the known caller")
	assert.Equal(t, all(http.StatusOK, atOnce), burstCodes, "twenty first requests with one new token, during the flood")
	assert.Positive(t, flood[http.StatusTooManyRequests], "the flood is throttled")
	assert.Equal(t, total, flood[http.StatusUnauthorized]+flood[http.StatusTooManyRequests], "the flood is refused, never failed: %v", flood)
	l := kubeauth.DefaultLimits
	bound := float64(l.GlobalBurst+l.ReservedBurst+l.KnownBurst) + float64(l.Global+l.Reserved+l.Known)*elapsed.Seconds()
	assert.LessOrEqual(t, reviews, bound, "reviews asked of the API server in %v", elapsed)
	assert.Zero(t, lines.Errors.Load(), "ERROR lines")
}

func count(codes []int, code int) int {
	n := 0
	for _, c := range codes {
		if c == code {
			n++
		}
	}
	return n
}

// reviewsAsked are the reviews the API server has answered so far, by resource (tokenreviews,
// localsubjectaccessreviews), from its own metrics: what it was asked, whoever asked.
func reviewsAsked(t *testing.T) map[string]float64 {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	body, err := cs.RESTClient().Get().AbsPath("/metrics").Stream(context.Background())
	require.NoError(t, err)
	defer body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(body)
	require.NoError(t, err)
	asked := map[string]float64{}
	family, ok := families["apiserver_request_total"]
	require.True(t, ok, "the API server's metrics have apiserver_request_total")
	for _, m := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["verb"] == "POST" && (labels["resource"] == "tokenreviews" || labels["resource"] == "localsubjectaccessreviews") {
			asked[labels["resource"]] += m.GetCounter().GetValue()
		}
	}
	return asked
}

// clientFrom is an HTTP client connecting from ip, a loopback address: the agent sees each ip as
// a source of its own.
func clientFrom(ip net.IP) *http.Client {
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}).DialContext}}
}

// status is GET /status with token through c: the answer's code, and how long it took.
func (a agentAPI) status(t *testing.T, c *http.Client, token string) (int, time.Duration) {
	req, err := http.NewRequest(http.MethodGet, a.base+"/status", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", fmt.Sprintf("Bearer %s", token))
	start := time.Now()
	resp, err := c.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode, time.Since(start)
}
