package perfinputs

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// generated holds the inputs generated for this process, by size.
var generated struct {
	sync.Mutex
	dir    string
	inputs map[int]*Inputs
}

// For generates (once per process, into a temporary directory) and loads the inputs of size n.
// Call Cleanup from TestMain.
func For(tb testing.TB, n int) *Inputs {
	tb.Helper()
	generated.Lock()
	defer generated.Unlock()
	if in, ok := generated.inputs[n]; ok {
		return in
	}
	if generated.dir == "" {
		dir, err := os.MkdirTemp("", "perfinputs-")
		if err != nil {
			tb.Fatal(err)
		}
		generated.dir, generated.inputs = dir, map[int]*Inputs{}
	}
	if err := Generate(generated.dir, n); err != nil {
		tb.Fatal(err)
	}
	in, err := Load(generated.dir, n)
	if err != nil {
		tb.Fatal(err)
	}
	generated.inputs[n] = in
	return in
}

// Cleanup removes what For generated.
func Cleanup() {
	generated.Lock()
	defer generated.Unlock()
	if generated.dir != "" {
		_ = os.RemoveAll(generated.dir)
		generated.dir, generated.inputs = "", nil
	}
}

// Variant is one pod of a benchmark's stream, decoded and as JSON, as the webhook holds it.
type Variant struct {
	Pod *corev1.Pod
	Raw []byte
}

// DistinctStream is how many pods a "distinct" stream cycles through: more than injector.Cache
// holds (256), so that none is answered from it, and few enough that the pods held for the benchmark
// do not swell the live heap, which would make every allocation cost more GC than in a webhook. The
// cache also remembers the last 4,096 pods it has seen, and keeps a pod the second time: to it a
// second pass over the same 512 would be pods seen twice, each copied into it and none reused. A
// benchmark therefore gives each pass a fresh cache, so that every pod is one it has not seen, as
// in a stream of distinct pods.
const DistinctStream = 512

// DistinctPods are pods no two of which a cache could answer alike: each has its own
// pod-template-hash label (the policies read all labels), name and uid. No SidecarSet of the
// generator selects on pod-template-hash, so all of them match the same SidecarSets.
func DistinctPods(tb testing.TB, template *corev1.Pod, count int) []Variant {
	return variants(tb, template, count, func(p *corev1.Pod, i int) {
		hash := fmt.Sprintf("%010x", i)
		p.Labels["pod-template-hash"] = hash
		p.GenerateName = "checkout-api-" + hash + "-"
	})
}

// BurstPods are a ReplicaSet's burst: one template, pods differing only in name and uid.
func BurstPods(tb testing.TB, template *corev1.Pod, count int) []Variant {
	return variants(tb, template, count, func(*corev1.Pod, int) {})
}

func variants(tb testing.TB, template *corev1.Pod, count int, vary func(*corev1.Pod, int)) []Variant {
	tb.Helper()
	out := make([]Variant, count)
	for i := range out {
		p := template.DeepCopy()
		vary(p, i)
		p.Name = fmt.Sprintf("%s%05x", p.GenerateName, i)
		p.UID = types.UID(fmt.Sprintf("6b1d3c2e-0000-4000-8000-%012x", i))
		raw, err := json.Marshal(p)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = Variant{Pod: p, Raw: raw}
	}
	return out
}

// ReportDeepCopies adds issue 15's yardstick to a finished benchmark loop: its time per op in deep
// copies of pod, the deep copy timed right after the loop, in the same process, so that both see the
// same machine. (testing.Benchmark cannot run inside a benchmark: it takes the same lock.)
func ReportDeepCopies(b *testing.B, pod *corev1.Pod) {
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
