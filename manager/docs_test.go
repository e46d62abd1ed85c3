package manager

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/controller"
	"github.com/sidecarops/sidecarops/controller/rollout"
	"github.com/sidecarops/sidecarops/internal/loader"
	"github.com/sidecarops/sidecarops/internal/testing/doctable"
	"github.com/sidecarops/sidecarops/webhook"
)

// docs/operations.md lists every metric the manager's components register, with its labels, and
// every Event reason the code records, and nothing else: the tables cannot drift from the code.
func TestOperationsTablesMatchTheCode(t *testing.T) {
	doc, err := doctable.Doc("operations.md")
	require.NoError(t, err)

	rec := &doctable.Recorder{Registerer: prometheus.NewRegistry()}
	_, err = newComponentMetrics(rec)
	require.NoError(t, err)
	registered, err := doctable.Described(rec.Collectors...)
	require.NoError(t, err)
	// The reasons of the Events the code records, each a constant beside the code that records it:
	// an Event with a new reason adds its constant here, and its row to the docs.
	emitted := []string{
		controller.ReasonCollides, controller.ReasonNoConflict, controller.ReasonInvalidCustomVersion,
		controller.ReasonResetContainerFailed, controller.ReasonResetContainerSucceed,
		rollout.ReasonRolloutWaiting, rollout.ReasonNotUpgradablePods,
		loader.ReasonPolicyCompileFailed, loader.ReasonBundleActivated, loader.ReasonBundleActivationFailed,
		webhook.PodSecurityViolationReason,
	}
	slices.Sort(emitted)

	documented, err := doctable.MetricsUnder(doc, "Metrics")
	require.NoError(t, err)
	allTables, err := doctable.Tables(doc, "")
	require.NoError(t, err)

	tests := []struct {
		name             string
		code, documented any
	}{
		{"metrics and their labels", registered, documented},
		{"Event reasons", emitted, doctable.Reasons(allTables)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotEmpty(t, tt.code, "nothing found in the code: the test reads nothing")
			assert.Equal(t, tt.code, tt.documented, "the code (-) against docs/operations.md (+)")
		})
	}
}
