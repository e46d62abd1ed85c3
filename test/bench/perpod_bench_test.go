package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/mutation"
	"github.com/sidecarops/sidecarops/test/bench/perfinputs"
)

func TestMain(m *testing.M) {
	code := m.Run()
	perfinputs.Cleanup()
	os.Exit(code)
}

// BenchmarkPerPod is issue 15's per-pod path on the generator's inputs: decide + inject + patch
// (internal/injector, as the webhook calls it: for the patch alone) for the pod the API server
// sends, with N SidecarSets of which about 1% match. "distinct" admits a stream of pods
// (perfinputs.DistinctStream) that differ in a label the policies read, so no cache can answer one
// from another; "burst" is a ReplicaSet's 100 pods of one template. deepcopies/op is the time per
// pod over that of one deep copy of the pod.
func BenchmarkPerPod(b *testing.B) {
	ctx := context.Background()
	inj := &mutation.Injector{Now: func() time.Time { return time.Unix(1700000000, 0) }, Rand: func() float64 { return 0.5 }}
	for _, n := range []int{10, 100, 1000, 10000} {
		// Inputs are generated inside the size's sub-benchmark, so that -bench selects what is built.
		b.Run(fmt.Sprintf("sidecarsets=%d", n), func(b *testing.B) {
			in := perfinputs.For(b, n)
			snap, err := injector.Snapshot(ctx, injector.Policies{State: bundles.State{SidecarSets: in.SidecarSets, Namespaces: in.Namespaces}})
			if err != nil {
				b.Fatal(err)
			}
			for _, stream := range []struct {
				name string
				pods []perfinputs.Variant
				// unseen gives each pass over the stream a fresh cache (perfinputs.DistinctStream).
				unseen bool
			}{{"distinct", perfinputs.DistinctPods(b, in.Pod, perfinputs.DistinctStream), true}, {"burst", perfinputs.BurstPods(b, in.Pod, 100), false}} {
				b.Run(stream.name, func(b *testing.B) {
					checkInjected(ctx, b, snap, inj, stream.pods[0], in.Matches)
					var cache *injector.Cache // the webhook's, which no pod of a "distinct" stream can hit
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						if i == 0 || stream.unseen && i%len(stream.pods) == 0 {
							cache = &injector.Cache{}
						}
						v := stream.pods[i%len(stream.pods)]
						i++
						if _, err := cache.Pod(ctx, snap, inj, injector.PodRequest{Pod: v.Pod, Raw: v.Raw, Decoded: true, PatchOnly: true}); err != nil {
							b.Fatal(err)
						}
					}
					perfinputs.ReportDeepCopies(b, in.Pod)
				})
			}
		})
	}
}

// checkInjected fails the benchmark unless the pod gets exactly the SidecarSets the generator made
// match it.
func checkInjected(ctx context.Context, b *testing.B, snap *engine.Snapshot, inj *mutation.Injector, v perfinputs.Variant, want []string) {
	b.Helper()
	res, err := injector.Pod(ctx, snap, inj, injector.PodRequest{Pod: v.Pod, Raw: v.Raw})
	if err != nil {
		b.Fatal(err)
	}
	if !slices.Equal(res.Injected, want) {
		b.Fatalf("injected %v, want %v", res.Injected, want)
	}
}
