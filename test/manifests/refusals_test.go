package manifests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/testing/render"
)

// Every value the chart's templates refuse is named in one `helm template`, one a line: an
// administrator with several of them learns them all from one attempt, not one per attempt.
func TestChartRefusesEveryProblemAtOnce(t *testing.T) {
	sets := []string{
		"daemon.port=10221", "crds.managed=true", "manager.pprofAddr=localhost:8090",
		"manager.image.repository=openkruise/kruise-manager",
		"featureGates=PodWebhook=false\\,AllAlpha=true\\,ResourcesDeletionProtection=true",
		"monitoring.serviceMonitor.enabled=true", "manager.metrics.enabled=false",
		"monitoring.podMonitor.enabled=true", "monitoring.podMonitor.tokenSecret.name=",
	}
	says := []string{
		"a value of OpenKruise's chart that this chart does not take: daemon (here: ",
		"a value of OpenKruise's chart that this chart does not take: crds (here: ",
		"a value of OpenKruise's chart that this chart does not take: manager.pprofAddr (here: ",
		"a value of OpenKruise's chart that this chart does not take: manager.image.repository openkruise/kruise-manager (here: ",
		"featureGates: PodWebhook=false turns off the pod webhook",
		"featureGates: AllAlpha=true, ResourcesDeletionProtection=true: not what sidecarops honours",
		"monitoring.service and monitoring.serviceMonitor need manager.metrics.enabled",
		"monitoring.podMonitor needs the agent's namespaces",
		"monitoring.podMonitor needs monitoring.podMonitor.tokenSecret.name",
	}
	_, err := render.Chart(t.TempDir(), chartDir, "sidecarops", namespace, nil, sets...)
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, fmt.Sprintf("the values have %d problems:\n", len(says)))
	lines := strings.Split(msg, "\n")
	for _, s := range says {
		var on []string
		for _, l := range lines {
			if strings.Contains(l, s) {
				on = append(on, l)
			}
		}
		if assert.Len(t, on, 1, "%q: on one line of its own\n%s", s, msg) {
			assert.True(t, strings.HasPrefix(on[0], "- "+s), "%q: a line of the list", on[0])
		}
	}
	assert.Contains(t, msg, "\nOpenKruise's values above: docs/install.md, \"Values from OpenKruise's chart\", maps each of them")

	// Fixing all but one leaves that one alone, without the pointer for OpenKruise's values.
	_, err = render.Chart(t.TempDir(), chartDir, "sidecarops", namespace, nil, "monitoring.podMonitor.enabled=true", "agent.rbac.namespaces={games}",
		"monitoring.podMonitor.tokenSecret.name=")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the values have 1 problem:\n- monitoring.podMonitor needs monitoring.podMonitor.tokenSecret.name")
	assert.NotContains(t, err.Error(), "OpenKruise's values above")
}
