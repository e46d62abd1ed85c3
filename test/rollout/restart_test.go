package rollout

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
)

// TestManagerKilledMidRollout: the manager runs as its own process (cmd/sidecarops-manager) and is
// SIGKILLed after the first batch; a new manager picks the rollout up from what the API server
// holds. At no observed moment is maxUnavailable exceeded, every pod survives, and each is upgraded
// exactly once (kwok counts the in-place restarts).
func TestManagerKilledMidRollout(t *testing.T) {
	bin := buildCommand(t, "sidecarops-manager")

	const n, budget = 8, 2
	f := newFleet(t, "restart", n, func(ss *v1beta1.SidecarSet) {
		ss.Spec.UpdateStrategy.MaxUnavailable = ptrIntStr(intstr.FromInt32(budget))
	}, nil)
	uids := f.uids()
	proc, err := cluster.StartManagerProcess(testCtx(t), bin)
	require.NoError(t, err)
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = proc.Kill()
		}
		// The other tests run with the in-process manager.
		require.NoError(t, cluster.RestartManager(testCtx(t)))
	})
	devcluster.LogsOnFailure(t, proc)

	pw, _ := budgetWatch(f, image("2"), budget)
	f.update(func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = image("2") })
	f.waitPartlyMoved(image("2"))
	require.NoError(t, proc.Kill())
	killed = true
	require.NoError(t, cluster.RestartManager(testCtx(t)))
	f.waitStatus(counts{n, n, n, n})
	pw.check(t)
	f.upgradedOnce(uids, image("2"))
}
