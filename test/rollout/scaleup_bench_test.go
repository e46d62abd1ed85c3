package rollout

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
)

// BenchmarkScaleUp measures what a scale-up of 5,000 kwok pods selected by one SidecarSet costs the
// manager, against what the manager spends on the admission of one pod. The manager runs as its own
// process (the sidecarops-manager binary with its default flags), so that its CPU (utime + stime
// of /proc/PID/stat, 10 ms ticks) is separate from the test's client, the API server and kwok. Each
// iteration, in a fresh namespace and SidecarSet, once the manager is idle:
//
//   - webhook: 5,000 pods the SidecarSet selects are created in dry run, 16 at a time. The API
//     server calls the pod webhook for each (and the test checks each was injected), then stores
//     nothing, so no pod event reaches the manager and the controller has nothing to do: the
//     manager's CPU over the burst, per pod, is the webhook's own CPU per admission (TLS, HTTP,
//     decoding, the decision and the patch, the GC; everything the process spends on it).
//   - scale-up: the same 5,000 pods (names aside) are created for real, 16 at a time, and kwok
//     runs them; the manager's CPU from the first creation until the SidecarSet's status counts
//     all 5,000 matched and ready, per pod: the same admissions plus the informers' watch events of
//     each pod's creation, scheduling and status reports, and the controller's work on them.
//   - unselected: 5,000 pods in another namespace, which no SidecarSet selects, are created for
//     real and kwok runs them; the manager's CPU until all are ready, per pod. The webhook's match
//     condition keeps the API server from calling the webhook for them, and the controller has
//     nothing to count: this is what receiving a pod's watch events costs, the part of the
//     scale-up that is neither the admission nor the controller's.
//
// The target (issue 14) is scale-up ≤ 2× webhook: what a pod costs the manager besides its
// admission is at most the admission's own cost. Both phases' pods differ only in name, as a
// ReplicaSet's do, so both meet the webhook's per-template cache alike. Run it alone:
//
//	go test ./test/rollout/ -run '^$' -bench ScaleUp -benchtime 1x -count 2
func BenchmarkScaleUp(b *testing.B) {
	const pods = 5000
	ctx := context.Background()
	c := cluster.Client
	bin := buildCommand(b, "sidecarops-manager")
	proc, err := cluster.StartManagerProcess(ctx, bin)
	require.NoError(b, err)
	devcluster.LogsOnFailure(b, proc)
	b.Cleanup(func() {
		_ = proc.Terminate()
		require.NoError(b, cluster.RestartManager(ctx))
	})

	var webhook, scaleUp, unselected time.Duration
	var wall time.Duration
	for range b.N {
		b.StopTimer()
		benchRuns++
		name := fmt.Sprintf("scaleup-%d", benchRuns)
		require.NoError(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
		require.NoError(b, c.Create(ctx, scopedSidecarSet(name)))
		b.Cleanup(func() { deleteFleet(b, name) })
		waitInjected(b, name)
		waitB(b, "the SidecarSet reconciled", func() error {
			if ss := getSS(b, name); ss.Status.ObservedGeneration != ss.Generation || ss.Status.LatestRevision == "" {
				return fmt.Errorf("observedGeneration %d of %d", ss.Status.ObservedGeneration, ss.Generation)
			}
			return nil
		})
		time.Sleep(2 * time.Second) // what the SidecarSet's creation set off in the manager is over
		b.StartTimer()

		cpu0 := managerCPU(b, proc)
		parallel(b, pods, func(i int) error {
			p := scopedPod(name, i, nil)
			p.Name = fmt.Sprintf("dry-%d", i)
			if err := c.Create(ctx, p, client.DryRunAll); err != nil {
				return err
			}
			if len(p.Spec.Containers) != 2 {
				return errors.New("not injected")
			}
			return nil
		})
		webhook += managerCPU(b, proc) - cpu0
		time.Sleep(2 * time.Second) // nothing should follow a dry run; if something does, it is not counted

		cpu0 = managerCPU(b, proc)
		start := time.Now()
		parallel(b, pods, func(i int) error { return c.Create(ctx, scopedPod(name, i, nil)) })
		waitB(b, "pods matched and ready", func() error {
			st := getSS(b, name).Status
			if st.MatchedPods != pods || st.ReadyPods != pods {
				return fmt.Errorf("matched %d ready %d", st.MatchedPods, st.ReadyPods)
			}
			return nil
		})
		scaleUp += managerCPU(b, proc) - cpu0
		wall += time.Since(start)

		other := name + "-unselected"
		require.NoError(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}))
		b.Cleanup(func() { deleteFleet(b, other) })
		time.Sleep(2 * time.Second) // the scale-up's last status writes are over
		cpu0 = managerCPU(b, proc)
		parallel(b, pods, func(i int) error { return c.Create(ctx, scopedPod(other, i, nil)) })
		waitB(b, "unselected pods ready", func() error {
			var l corev1.PodList
			if err := c.List(ctx, &l, client.InNamespace(other)); err != nil {
				return err
			}
			ready := 0
			for i := range l.Items {
				if len(l.Items[i].Spec.Containers) != 1 {
					return fmt.Errorf("pod %s was injected", l.Items[i].Name)
				}
				if runningReady(&l.Items[i]) {
					ready++
				}
			}
			if ready != pods {
				return fmt.Errorf("%d of %d ready", ready, pods)
			}
			return nil
		})
		unselected += managerCPU(b, proc) - cpu0
	}
	admissions := float64(b.N * pods)
	b.ReportMetric(float64(webhook.Microseconds())/admissions, "webhook-cpu-µs/admission")
	b.ReportMetric(float64(scaleUp.Microseconds())/admissions, "manager-cpu-µs/pod")
	b.ReportMetric(float64(scaleUp)/float64(webhook), "ratio")
	b.ReportMetric(float64(unselected.Microseconds())/admissions, "unselected-cpu-µs/pod")
	b.ReportMetric(wall.Seconds()/float64(b.N), "scaleup-s")
}
