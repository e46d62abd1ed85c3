package rollout

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/manager"
	"github.com/sidecarops/sidecarops/webhook/prefilter"
)

// maxReachDelay bounds how long after its creation a SidecarSet may still miss pods: the webhook's
// own snapshot trails the API server by a watch event and a debounced compile (tens to hundreds of
// milliseconds here), with or without the prefilter. Before the admitted terms, a SidecarSet
// created while no leader ran missed its pods until a new leader was elected (the 15 s lease).
const maxReachDelay = 2 * time.Second

// A new SidecarSet reaches its pods as soon with the pod webhook's prefilter as the webhook's own
// snapshot allows, in every state of the replicas: a steady leader; and a leader SIGKILLed the
// moment before the SidecarSet is created, its lease still held, so that the replica the API server
// calls is not the leader until the lease expires and it takes over.
func TestNewSidecarSetReachesItsPodsDuringFailover(t *testing.T) {
	t.Run("steady leader", func(t *testing.T) {
		requireFiltered(t)
		reach(t, "reach-steady", func() bool { return true })
	})

	t.Run("leader killed", func(t *testing.T) {
		bin := buildCommand(t, "sidecarops-manager")
		saved := cluster.Manager
		t.Cleanup(func() {
			cluster.Manager = saved
			require.NoError(t, cluster.RestartManager(testCtx(t)))
		})
		// The leader listens where the API server never calls (a port of its own), the follower
		// where it does: killing the leader leaves the webhook served by a replica that is not
		// leading, as a Service does once the dead pod's endpoint is gone.
		cluster.Manager.LeaderElection = true
		webhookAddr, err := devcluster.FreeAddr()
		require.NoError(t, err)
		_, port, _ := net.SplitHostPort(webhookAddr)
		cluster.Manager.WebhookPort, _ = strconv.Atoi(port)
		cluster.Manager.ProbeAddr, err = devcluster.FreeAddr()
		require.NoError(t, err)
		leader, err := cluster.StartManagerProcess(testCtx(t), bin)
		require.NoError(t, err)
		t.Cleanup(func() { _ = leader.Kill() })
		devcluster.LogsOnFailure(t, leader)
		var leaderID string
		eventually(t, "the first replica leads", func() error {
			if leaderID = leaseHolder(t); leaderID == "" {
				return fmt.Errorf("no holder yet")
			}
			return nil
		})
		cluster.Manager.WebhookPort, cluster.Manager.ProbeAddr = saved.WebhookPort, saved.ProbeAddr
		follower, err := cluster.StartManagerProcess(testCtx(t), bin)
		require.NoError(t, err)
		t.Cleanup(func() {
			// Stopped as a pod is, so it gives the lease up: killed, it would hold it for the
			// lease duration, and the next test's manager would wait behind a dead holder.
			_ = follower.Terminate()
		})
		devcluster.LogsOnFailure(t, follower)
		requireFiltered(t)

		require.NoError(t, leader.Kill())
		took := reach(t, "reach-failover", func() bool {
			h := leaseHolder(t)
			return h != "" && h != leaderID
		})
		require.NotEqual(t, leaderID, leaseHolder(t), "the follower took the lease over")
		t.Logf("lease handed over %s after the leader was killed", took)
	})
}

// reach creates namespace and SidecarSet name at once, then pods (dry run: the whole admission
// chain, nothing stored) every 50 ms until 2 s past both the first injected pod and done(). Every
// pod created later than maxReachDelay after the SidecarSet must have its sidecar. It returns how
// long done took.
func reach(t *testing.T, name string, done func() bool) time.Duration {
	t.Helper()
	ctx := testCtx(t)
	c := cluster.Client
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	require.NoError(t, c.Create(ctx, scopedSidecarSet(name)))
	created := time.Now()
	var lastMiss, firstHit, doneAt time.Duration
	misses, pods := 0, 0
	for i := 0; ; i++ {
		at := time.Since(created)
		p := scopedPod(name, i, nil)
		require.NoError(t, c.Create(ctx, p, client.DryRunAll))
		pods++
		if len(p.Spec.Containers) < 2 {
			misses++
			lastMiss = at
		} else if firstHit == 0 {
			firstHit = at
		}
		if doneAt == 0 && done() {
			doneAt = at
		}
		if firstHit > 0 && doneAt > 0 && at > max(firstHit, doneAt)+2*time.Second {
			break
		}
		require.Less(t, at, 2*time.Minute, "the SidecarSet never reached its pods and the replicas never settled")
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d of %d pods created over %s without their sidecar, the last %s after the SidecarSet was created; the first injected %s after",
		misses, pods, time.Since(created).Round(time.Millisecond), lastMiss.Round(time.Millisecond), firstHit.Round(time.Millisecond))
	require.LessOrEqual(t, lastMiss, maxReachDelay, "pods created %s after their SidecarSet got no sidecar", lastMiss)
	return doneAt
}

// requireFiltered fails unless the pod webhook carries the prefilter's condition, without which
// there is nothing to test.
func requireFiltered(t *testing.T) {
	t.Helper()
	eventually(t, "the pod webhook is filtered", func() error {
		var m admissionregv1.MutatingWebhookConfiguration
		if err := cluster.Client.Get(testCtx(t), client.ObjectKey{Name: manager.WebhookConfigurationName}, &m); err != nil {
			return err
		}
		f, _ := prefilter.Registered(&m, manager.PodWebhookName)
		if expr := f.CEL(); expr == "" || strings.TrimSpace(expr) == "true" {
			return fmt.Errorf("no filter: %q", expr)
		}
		return nil
	})
}

func leaseHolder(t *testing.T) string {
	var l coordinationv1.Lease
	key := types.NamespacedName{Namespace: devcluster.Namespace, Name: manager.LeaderElectionID}
	if err := cluster.Client.Get(testCtx(t), key, &l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
