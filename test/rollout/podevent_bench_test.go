package rollout

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkPodEvent measures what a pod event costs the manager when one SidecarSet manages 1,000
// or 10,000 pods (unscheduled, so that no kubelet work is measured). Each iteration deletes a pod
// and creates it again, each time waiting until the SidecarSet's status has counted the change: two
// pod events, each reconciled. The figure is this process's CPU (getrusage: the in-process manager,
// its webhook for the creation and its controller, and the test's client) per event; what does not
// depend on the fleet's size (the admission, the client) is the same in both. Run it alone:
//
//	go test ./test/rollout/ -run '^$' -bench PodEvent -benchtime 40x
func BenchmarkPodEvent(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			ctx := context.Background()
			benchRuns++
			name := fmt.Sprintf("event-%d-%d", n, benchRuns)
			c := cluster.Client
			require.NoError(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
			require.NoError(b, c.Create(ctx, scopedSidecarSet(name)))
			b.Cleanup(func() {
				_ = c.Delete(ctx, scopedSidecarSet(name))
				_ = c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(name))
			})
			pod := func(i int) *corev1.Pod {
				p := scopedPod(name, i, nil)
				p.Spec.NodeName = ""
				return p
			}
			waitB(b, "injection", func() error {
				p := pod(-1)
				if err := c.Create(ctx, p, client.DryRunAll); err != nil {
					return err
				}
				if len(p.Spec.Containers) != 2 {
					return fmt.Errorf("not injected yet")
				}
				return nil
			})
			parallel(b, n, func(i int) error { return c.Create(ctx, pod(i)) })
			matched := func(want int32) {
				waitB(b, fmt.Sprintf("%d pods matched", want), func() error {
					st := getSS(b, name).Status
					if st.MatchedPods != want || st.UpdatedPods != want {
						return fmt.Errorf("matched %d updated %d", st.MatchedPods, st.UpdatedPods)
					}
					return nil
				})
			}
			matched(int32(n))

			before := cpu(b)
			start := time.Now()
			b.ResetTimer()
			for i := range b.N {
				p := pod(i % n)
				require.NoError(b, c.Delete(ctx, p))
				matched(int32(n - 1))
				require.NoError(b, c.Create(ctx, pod(i%n)))
				matched(int32(n))
			}
			b.StopTimer()
			events := float64(2 * b.N)
			b.ReportMetric(float64((cpu(b)-before).Microseconds())/events, "cpu-µs/event")
			b.ReportMetric(float64(time.Since(start).Milliseconds())/events, "ms/event")
		})
	}
}

// cpu is the CPU this process has used (user and system).
func cpu(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
