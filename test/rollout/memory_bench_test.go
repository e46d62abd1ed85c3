package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
)

// deployedMemoryLimit is the memory limit config/manager's Deployment and the chart's default values
// give the manager container (512Mi), of which the manager sets 90% as the Go soft memory limit.
const deployedMemoryLimit = 512 << 20

// BenchmarkManagerMemory measures the manager's resident memory, as its own process, with 1,000
// SidecarSets and 10,000 pods (each SidecarSet selects ten; unscheduled, so no kubelet work), and
// what its memory settings cost the pod webhook there. With the fleet in place the manager is
// started twice, one after the other, with the same binary:
//
//   - before: the defaults before issue 14's memory bound, --gc-percent 400 throughout and no
//     soft memory limit (--gc-heap-target=0 --memory-limit=0);
//   - deployed: as the Deployment runs it, default flags, and the soft memory limit the manager
//     derives from its container's limit (--memory-limit 90% of 512Mi: this process has no such
//     cgroup limit to read, so the test passes the figure).
//
// Each time: the largest RSS over 10 s once every SidecarSet's status has counted its pods
// (peak-RSS-MiB; peak-RssAnon-MiB leaves out pages of mapped files, the executable's code), then 2,000 pods the SidecarSets select created in dry run, 16 at a time: the
// manager process's CPU per admission (utime + stime, 10 ms ticks; no pod is stored, so the
// controller has nothing to do) and the client's latency per creation. Run it alone:
//
//	go test ./test/rollout/ -run '^$' -bench ManagerMemory -benchtime 1x
func BenchmarkManagerMemory(b *testing.B) {
	const sidecarSets, pods, admissions = 1000, 10000, 2000
	ctx := context.Background()
	benchRuns++
	ns := fmt.Sprintf("memory-%d", benchRuns)
	c := cluster.Client
	require.NoError(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	set := func(i int) *v1beta1.SidecarSet {
		ss := scopedSidecarSet(fmt.Sprintf("%s-%d", ns, i))
		ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed(ns)
		ss.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"svc": fmt.Sprint(i)}}
		ss.Spec.Containers[0].Name = fmt.Sprintf("agent-%d", i)
		return ss
	}
	pod := func(name string, i int) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"svc": fmt.Sprint(i % sidecarSets)}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
		}
	}
	b.Cleanup(func() {
		for i := range sidecarSets {
			_ = c.Delete(ctx, set(i))
		}
		_ = c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))
	})
	parallel(b, sidecarSets, func(i int) error { return c.Create(ctx, set(i)) })
	waitB(b, "injection", func() error {
		p := pod("probe", sidecarSets-1)
		if err := c.Create(ctx, p, client.DryRunAll); err != nil {
			return err
		}
		if len(p.Spec.Containers) != 2 {
			return errors.New("not injected yet")
		}
		return nil
	})
	parallel(b, pods, func(i int) error { return c.Create(ctx, pod(fmt.Sprintf("pod-%d", i), i)) })
	bin := buildCommand(b, "sidecarops-manager")
	b.Cleanup(func() { require.NoError(b, cluster.RestartManager(ctx)) })

	for _, run := range []struct {
		name string
		opts devcluster.ProcessOptions
	}{
		{"before-", devcluster.ProcessOptions{Args: []string{"--gc-heap-target=0", "--memory-limit=0"}}},
		{"", devcluster.ProcessOptions{Args: []string{fmt.Sprintf("--memory-limit=%d", deployedMemoryLimit*9/10)}}},
	} {
		proc, err := cluster.StartManagerProcessWith(ctx, bin, run.opts)
		require.NoError(b, err)
		devcluster.LogsOnFailure(b, proc)
		waitB(b, "every SidecarSet counted its pods", func() error {
			var list v1beta1.SidecarSetList
			if err := c.List(ctx, &list); err != nil {
				return err
			}
			short := 0
			for _, ss := range list.Items {
				if ss.Spec.NamespaceSelector != nil && ss.Spec.NamespaceSelector.MatchLabels[v1beta1.NamespaceNameLabel] == ns && ss.Status.MatchedPods != pods/sidecarSets {
					short++
				}
			}
			if short > 0 {
				return fmt.Errorf("%d SidecarSets not counted yet", short)
			}
			return nil
		})
		var peak, peakAnon int64
		for range 20 {
			rss, err := proc.RSS()
			require.NoError(b, err)
			anon, err := proc.RSSAnon()
			require.NoError(b, err)
			peak, peakAnon = max(peak, rss), max(peakAnon, anon)
			time.Sleep(500 * time.Millisecond)
		}
		b.ReportMetric(float64(peak)/(1<<20), run.name+"peak-RSS-MiB")
		b.ReportMetric(float64(peakAnon)/(1<<20), run.name+"peak-RssAnon-MiB")

		var mu sync.Mutex
		latencies := make([]time.Duration, 0, admissions)
		cpu0 := managerCPU(b, proc)
		parallel(b, admissions, func(i int) error {
			p := pod(fmt.Sprintf("dry-%d", i), i)
			start := time.Now()
			if err := c.Create(ctx, p, client.DryRunAll); err != nil {
				return err
			}
			took := time.Since(start)
			if len(p.Spec.Containers) != 2 {
				return errors.New("not injected")
			}
			mu.Lock()
			latencies = append(latencies, took)
			mu.Unlock()
			return nil
		})
		cpu := managerCPU(b, proc) - cpu0
		slices.Sort(latencies)
		b.ReportMetric(float64(cpu.Microseconds())/admissions, run.name+"webhook-cpu-µs/admission")
		b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, run.name+"create-p50-ms")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, run.name+"create-p99-ms")
		rss, err := proc.RSS()
		require.NoError(b, err)
		b.ReportMetric(float64(rss)/(1<<20), run.name+"after-admissions-RSS-MiB")
		require.NoError(b, proc.Terminate())
	}
}
