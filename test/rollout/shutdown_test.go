package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
)

// TestShutdownReleasesTheLease: the manager runs as its own process with leader election and is
// stopped as the kubelet stops a pod (SIGTERM). It gives its lease up on the way out, so the next
// replica can lead at once; before, the lease stayed held until it expired (15 s), during which no
// replica ran the SidecarSet controller.
func TestShutdownReleasesTheLease(t *testing.T) {
	bin := buildCommand(t, "sidecarops-manager")
	// A holder left by a process killed earlier keeps the lease until it expires; the manager
	// started here must be the one holding it.
	stale := leaseHolder(t)
	cluster.Manager.LeaderElection = true
	proc, err := cluster.StartManagerProcess(testCtx(t), bin)
	cluster.Manager.LeaderElection = false // the other tests run with the in-process manager, alone
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = proc.Kill()
		}
		require.NoError(t, cluster.RestartManager(testCtx(t)))
	})
	devcluster.LogsOnFailure(t, proc)

	eventually(t, "the manager holds the lease", func() error {
		if h := leaseHolder(t); h == "" || h == stale {
			return fmt.Errorf("holder %q, not the manager started here", h)
		}
		return nil
	})

	began := time.Now()
	require.NoError(t, proc.Terminate(), "a clean shutdown on SIGTERM")
	stopped = true
	t.Logf("SIGTERM to exit: %s", time.Since(began))
	require.Empty(t, leaseHolder(t), "the lease was released before the process exited")
}
