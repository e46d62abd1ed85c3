package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/mutation"
	"github.com/sidecarops/sidecarops/test/bench/perfinputs"
)

// generated holds the inputs gen_inputs.py wrote for this process, by size.
var generated struct {
	sync.Mutex
	dir    string
	inputs map[int]*perfinputs.Inputs
}

func TestMain(m *testing.M) {
	code := m.Run()
	if generated.dir != "" {
		_ = os.RemoveAll(generated.dir)
	}
	os.Exit(code)
}

// inputs generates (once per process) and loads the issue 15 inputs of size n.
func inputs(b *testing.B, n int) *perfinputs.Inputs {
	b.Helper()
	generated.Lock()
	defer generated.Unlock()
	if in, ok := generated.inputs[n]; ok {
		return in
	}
	if generated.dir == "" {
		dir, err := os.MkdirTemp("", "perfinputs-")
		if err != nil {
			b.Fatal(err)
		}
		generated.dir, generated.inputs = dir, map[int]*perfinputs.Inputs{}
	}
	if err := perfinputs.Generate(generated.dir, n); err != nil {
		b.Fatal(err)
	}
	in, err := perfinputs.Load(generated.dir, n)
	if err != nil {
		b.Fatal(err)
	}
	generated.inputs[n] = in
	return in
}

// podVariant is one pod of a benchmark's stream, decoded and as JSON, as the webhook holds it.
type podVariant struct {
	pod *corev1.Pod
	raw []byte
}

// distinctPods are pods no two of which a cache could answer alike: each has its own
// pod-template-hash label (which the policies read: they receive all labels), name and uid. No
// SidecarSet of the generator selects on pod-template-hash, so every one matches the same SidecarSets.
func distinctPods(b *testing.B, template *corev1.Pod, count int) []podVariant {
	return variants(b, template, count, func(p *corev1.Pod, i int) {
		hash := fmt.Sprintf("%010x", i)
		p.Labels["pod-template-hash"] = hash
		p.GenerateName = "checkout-api-" + hash + "-"
	})
}

// burstPods are a ReplicaSet's burst: one template, pods differing only in name and uid.
func burstPods(b *testing.B, template *corev1.Pod, count int) []podVariant {
	return variants(b, template, count, func(*corev1.Pod, int) {})
}

func variants(b *testing.B, template *corev1.Pod, count int, vary func(*corev1.Pod, int)) []podVariant {
	b.Helper()
	out := make([]podVariant, count)
	for i := range out {
		p := template.DeepCopy()
		vary(p, i)
		p.Name = fmt.Sprintf("%s%05x", p.GenerateName, i)
		p.UID = types.UID(fmt.Sprintf("6b1d3c2e-0000-4000-8000-%012x", i))
		raw, err := json.Marshal(p)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = podVariant{pod: p, raw: raw}
	}
	return out
}

// reportDeepCopies adds the yardstick of issue 15: the benchmark's time per op in deep copies of
// pod, the deep copy timed right after the loop, in the same process, so that both see the same
// machine. (testing.Benchmark cannot be nested in a running benchmark: it takes the same lock.)
func reportDeepCopies(b *testing.B, pod *corev1.Pod) {
	b.Helper()
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	var sink *corev1.Pod
	n, start := 0, time.Now()
	for n < 1000 || time.Since(start) < 100*time.Millisecond {
		sink = pod.DeepCopy()
		n++
	}
	perCopy := float64(time.Since(start).Nanoseconds()) / float64(n)
	_ = sink
	b.ReportMetric(perOp/perCopy, "deepcopies/op")
}

// BenchmarkPerPod is issue 15's per-pod path on the generator's inputs: decide + inject + patch
// (internal/injector, as every face runs it) for the pod the API server sends, with N SidecarSets of
// which about 1% match. "distinct" admits a stream of 4,096 pods that differ in a label the
// policies read, so no cache can answer one from another; "burst" is a ReplicaSet's 100 pods of one
// template. deepcopies/op is the time per pod over that of one deep copy of the pod.
func BenchmarkPerPod(b *testing.B) {
	ctx := context.Background()
	inj := &mutation.Injector{Now: func() time.Time { return time.Unix(1700000000, 0) }, Rand: func() float64 { return 0.5 }}
	for _, n := range []int{10, 100, 1000, 10000} {
		in := inputs(b, n)
		snap, _, err := injector.Snapshot(ctx, injector.Policies{State: bundles.State{SidecarSets: in.SidecarSets, Namespaces: in.Namespaces}})
		if err != nil {
			b.Fatal(err)
		}
		for _, stream := range []struct {
			name string
			pods []podVariant
		}{{"distinct", distinctPods(b, in.Pod, 4096)}, {"burst", burstPods(b, in.Pod, 100)}} {
			b.Run(fmt.Sprintf("sidecarsets=%d/%s", n, stream.name), func(b *testing.B) {
				checkInjected(ctx, b, snap, inj, stream.pods[0], in.Matches)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					v := stream.pods[i%len(stream.pods)]
					i++
					if _, err := injector.Pod(ctx, snap, inj, injector.PodRequest{Pod: v.pod, Raw: v.raw}); err != nil {
						b.Fatal(err)
					}
				}
				reportDeepCopies(b, in.Pod)
			})
		}
	}
}

// checkInjected fails the benchmark unless the pod gets exactly the SidecarSets the generator made
// match it.
func checkInjected(ctx context.Context, b *testing.B, snap *engine.Snapshot, inj *mutation.Injector, v podVariant, want []string) {
	b.Helper()
	res, err := injector.Pod(ctx, snap, inj, injector.PodRequest{Pod: v.pod, Raw: v.raw})
	if err != nil {
		b.Fatal(err)
	}
	if !slices.Equal(res.Injected, want) {
		b.Fatalf("injected %v, want %v", res.Injected, want)
	}
}
