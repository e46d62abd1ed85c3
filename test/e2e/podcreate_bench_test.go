package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/webhook"
)

// BenchmarkPodCreate measures pod creation through the real API server (etcd write included), in
// one run, three ways (ns/op is one of each): the sidecarops pod webhook called and injecting; called
// on a pod no SidecarSet selects (the cost of the API server's webhook call itself); not called:
//
//	make envtest-bins && KUBEBUILDER_ASSETS=<printed dir> go test -run '^$' -bench PodCreate -benchtime 300x ./test/e2e/
//
// p50/p99 are reported besides the mean (ns/op) because the overhead a webhook adds is a latency
// distribution question.
func BenchmarkPodCreate(b *testing.B) {
	ctx := context.Background()
	if os.Getenv("GOGC") == "" {
		// The manager runs in this process: give it the GC setting the sidecarops-manager binary
		// runs with (its --gc-percent default, cmd/sidecarops-manager DefaultGCPercent).
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	ns := "e2e-bench"
	// -count > 1 runs this again on the same cluster.
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		sidecarSet("e2e-bench", map[string]string{"app": "bench"}, "bench-agent"),
	} {
		if err := cluster.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	benchRuns++
	// Let the loader compile the SidecarSet in before measuring.
	probe := pod(ns, "probe", map[string]string{"app": "bench"})
	deadline := time.Now().Add(timeout)
	for {
		c := probe.DeepCopy()
		if err := cluster.Client.Create(ctx, c, client.DryRunAll); err != nil {
			b.Fatal(err)
		}
		if c.Annotations[v1alpha1.SidecarSetListAnnotation] != "" {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("SidecarSet never compiled in")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Pods rotate between the three cases — kube-system is excluded by the webhook's
	// namespaceSelector, so the API server does not call it there — and so share every condition of
	// the run (etcd's state, the machine's load): the differences are the webhook's.
	var with, notMatched, without []time.Duration
	handlerSum0, handlerCount0 := podHandlerTime(b)
	i := 0
	for b.Loop() {
		for _, target := range []struct {
			ns, app  string
			series   *[]time.Duration
			injected bool
		}{{ns, "bench", &with, true}, {ns, "other", &notMatched, false}, {"kube-system", "bench", &without, false}} {
			p := pod(target.ns, fmt.Sprintf("bench%d-%s-%d", benchRuns, target.app, i), map[string]string{"app": target.app})
			start := time.Now()
			if err := cluster.Client.Create(ctx, p); err != nil {
				b.Fatal(err)
			}
			*target.series = append(*target.series, time.Since(start))
			if got := len(p.Spec.Containers) == 2; got != target.injected {
				b.Fatalf("pod %s/%s injected=%v, want %v", p.Namespace, p.Name, got, target.injected)
			}
		}
		i++
	}
	pct := func(xs []time.Duration, q int) float64 {
		sorted := append([]time.Duration(nil), xs...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		return float64(sorted[len(sorted)*q/100].Microseconds())
	}
	b.ReportMetric(pct(with, 50), "webhook-p50-µs")
	b.ReportMetric(pct(with, 99), "webhook-p99-µs")
	b.ReportMetric(pct(notMatched, 50), "called-nomatch-p50-µs")
	b.ReportMetric(pct(without, 50), "nowebhook-p50-µs")
	b.ReportMetric(pct(without, 99), "nowebhook-p99-µs")
	b.ReportMetric(100*(pct(with, 50)/pct(without, 50)-1), "p50-overhead-%")
	// What of the overhead is the handler's own work (our histogram) rather than the API server's
	// webhook call (encoding, TLS, HTTP/2, patch application).
	handlerSum, handlerCount := podHandlerTime(b)
	if n := handlerCount - handlerCount0; n > 0 {
		b.ReportMetric(1e6*(handlerSum-handlerSum0)/float64(n), "handler-mean-µs")
		b.ReportMetric(float64(n)/float64(len(with)+len(notMatched)), "calls/pod")
	}
}

// benchRuns numbers BenchmarkPodCreate's invocations so pod names never repeat.
var benchRuns int

// podHandlerTime reads the pod webhook's latency histogram from the manager's metrics registry
// (the manager runs in this process).
func podHandlerTime(b *testing.B) (sum float64, count uint64) {
	b.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "sidecarops_webhook_admission_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == webhook.PodPath {
					return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	b.Fatal("no pod webhook latency histogram")
	return 0, 0
}
