package loader

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/pprof/profile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/testing/fleet"
)

// BenchmarkHeapPerSidecarSet is the heap each SidecarSet costs the manager once its snapshot serves
// (issue 38), by holder. The SidecarSets of internal/testing/fleet are stored as the manager's
// informer stores them (informerCache), handed to a Loader by its own informer handlers, and compiled
// by its own loop into the snapshot it swaps in, as at the manager's start. Every allocation is then
// charged to the first holder (heapHolders) whose function is on the stack that allocated it: a
// string a later holder shares is charged once, to the one that made it, so each figure is what that
// holder alone adds. The figures are the difference from a Loader serving no SidecarSet, per
// SidecarSet; heap-B/ss is the same difference read from runtime.MemStats, as a check of the sum.
// Allocation is sampled byte for byte (runtime.MemProfileRate = 1), which makes the compile several
// times slower; the figures do not depend on CPU load:
//
//	go test ./internal/loader/ -run '^$' -bench HeapPerSidecarSet -benchtime 1x -count 3
//
// With revisions=1 each SidecarSet also has the ControllerRevision of its spec, as the controller
// writes it, held by the informer and the Loader like the SidecarSets.
func BenchmarkHeapPerSidecarSet(b *testing.B) {
	for _, c := range []struct{ n, revisions int }{{1000, 0}, {10000, 0}, {1000, 1}} {
		b.Run(fmt.Sprintf("sidecarsets=%d/revisions=%d", c.n, c.revisions), func(b *testing.B) {
			var per heapShares
			for b.Loop() {
				per = measureHeapShares(b, c.n, c.revisions > 0)
			}
			for _, h := range heapHolders {
				b.ReportMetric(per.bytes[h.name], h.name+"-B/ss")
			}
			b.ReportMetric(per.bytes["other"], "other-B/ss")
			b.ReportMetric(per.total, "total-B/ss")
			b.ReportMetric(per.heapAlloc, "heap-B/ss")
			b.ReportMetric(0, "ns/op") // one measurement of a fleet's start; its duration says nothing
		})
	}
}

// heapHolders are the holders of a SidecarSet in the manager, each named by the functions that
// allocate what it holds, most specific first: an allocation goes to the first holder with one of
// its functions anywhere on the stack (the rule text is built inside the builder, the builder runs
// inside the engine's Compiler).
var heapHolders = []struct {
	name  string
	funcs []string
}{
	// The builder's rendering of each SidecarSet's rules, and the parser's copy of the index module
	// that every parsed term's Location.Text slices.
	{"rule-text", []string{
		"github.com/sidecarops/sidecarops/bundles.IndexRules",
		"github.com/open-policy-agent/opa/v1/ast/internal/scanner.New",
	}},
	// The policy document as OPA values (bundles.Normalize, astDoc), the builder's data objects, and
	// the store the snapshot reads them from.
	{"ast-doc", []string{
		"github.com/sidecarops/sidecarops/bundles.(*Builder).Build",
		"github.com/open-policy-agent/opa/v1/storage/inmem.NewFromObjectWithOpts",
	}},
	// The parsed and compiled policies and index rules (the base ast.Compiler, any delta) and the
	// prepared queries over them.
	{"compiled", []string{
		"github.com/sidecarops/sidecarops/engine.(*Compiler).compileBase",
		"github.com/sidecarops/sidecarops/engine.(*Compiler).compileDelta",
		"github.com/sidecarops/sidecarops/engine.(*Snapshot).prepare",
	}},
	// The loader's defaulted and hashed copies (of a SidecarSet stored without defaults), and its
	// maps of what it holds.
	{"loader", []string{
		"github.com/sidecarops/sidecarops/internal/loader.(*Loader).SetSidecarSet",
		"github.com/sidecarops/sidecarops/internal/loader.(*Loader).SetRevision",
	}},
	{"informer", []string{"github.com/sidecarops/sidecarops/internal/loader.informerCache"}},
}

// heapShares is the live heap a fleet adds, per SidecarSet, by holder ("other": charged to none).
type heapShares struct {
	bytes            map[string]float64
	total, heapAlloc float64
}

// measureHeapShares brings up a Loader with no SidecarSet, then one fed n SidecarSets (and, with
// revisions, a ControllerRevision of each), each serving a snapshot, and returns what the second
// holds more, per SidecarSet.
func measureHeapShares(tb testing.TB, n int, revisions bool) heapShares {
	tb.Helper()
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	served := func(sets int) (map[string]int64, uint64) {
		raws := apiServerJSON(tb, sets)
		if revisions {
			raws = append(raws, revisionsJSON(tb, raws)...)
		}
		store, err := informerCache(raws)
		require.NoError(tb, err)
		stop := serveLoader(tb, store)
		defer stop()
		live, heap := liveByHolder(tb)
		runtime.KeepAlive(store) // the informer's copies are measured as held
		return live, heap
	}
	// A fleet of one first, so that what the process initialises once (the decoders' and encoders'
	// type caches, OPA's) is in both measurements, not charged to the first fleet measured.
	served(1)
	before, heapBefore := served(0)
	after, heapAfter := served(n)
	out := heapShares{bytes: map[string]float64{}, heapAlloc: (float64(heapAfter) - float64(heapBefore)) / float64(n)}
	for name, v := range after {
		out.bytes[name] = float64(v-before[name]) / float64(n)
		out.total += out.bytes[name]
	}
	// The attribution goes by function names: a renamed function would silently move its holder's
	// bytes to "other".
	for _, h := range heapHolders {
		if out.bytes[h.name] <= 0 {
			tb.Fatalf("no live bytes charged to %s: does one of %v still allocate them?", h.name, h.funcs)
		}
	}
	if out.bytes["other"] > out.total/10 {
		tb.Fatalf("over a tenth of the heap per SidecarSet is charged to no holder: %v", out.bytes)
	}
	return out
}

// apiServerJSON is n fleet SidecarSets as the API server sends them: with the metadata it sets and a
// managedFields entry.
func apiServerJSON(tb testing.TB, n int) [][]byte {
	tb.Helper()
	sets, err := fleet.SidecarSets(n, 1)
	require.NoError(tb, err)
	created := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	raws := make([][]byte, len(sets))
	for i, ss := range sets {
		ss.TypeMeta = metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: "SidecarSet"}
		ss.UID = types.UID(fmt.Sprintf("6f1c0d2e-0000-4000-8000-%012d", i))
		ss.ResourceVersion = fmt.Sprint(100000 + i)
		ss.Generation = 1
		ss.CreationTimestamp = created
		ss.ManagedFields = []metav1.ManagedFieldsEntry{{
			Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: ss.APIVersion,
			Time: &created, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:containers":{},"f:selector":{},"f:volumes":{}}}`),
		}}
		if raws[i], err = json.Marshal(ss); err != nil {
			tb.Fatal(err)
		}
	}
	return raws
}

// revisionsJSON is a ControllerRevision of each SidecarSet of raws as the API server sends it: as
// the controller writes it (rollout.NewRevision), in the manager's namespace.
func revisionsJSON(tb testing.TB, raws [][]byte) [][]byte {
	tb.Helper()
	out := make([][]byte, len(raws))
	for i, raw := range raws {
		var ss v1beta1.SidecarSet
		require.NoError(tb, json.Unmarshal(raw, &ss))
		cr, err := fleet.Revision(&ss, heapBenchNamespace)
		require.NoError(tb, err)
		cr.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"}
		cr.UID = types.UID(fmt.Sprintf("7a2d0e3f-0000-4000-8000-%012d", i))
		cr.ResourceVersion = fmt.Sprint(200000 + i)
		cr.CreationTimestamp = ss.CreationTimestamp
		if out[i], err = json.Marshal(cr); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// heapBenchNamespace is the manager's namespace in the benchmark: the ControllerRevisions' and the
// Loader's revision namespace.
const heapBenchNamespace = "sidecarops-system"

// informerCache stores objects as the manager's informers do: decoded by the scheme's codec,
// stripped of managedFields by the cache's DefaultTransform (manager.go), in a client-go indexer with
// controller-runtime's namespace index (one for every kind, as the figures do not depend on it).
func informerCache(raws [][]byte) (toolscache.Indexer, error) {
	scheme := kruntime.NewScheme()
	if err := v1beta1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := appsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	transform := cache.TransformStripManagedFields()
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	for _, raw := range raws {
		obj, _, err := decoder.Decode(raw, nil, nil)
		if err != nil {
			return nil, err
		}
		stripped, err := transform(obj)
		if err != nil {
			return nil, err
		}
		if err := store.Add(stripped); err != nil {
			return nil, err
		}
	}
	return store, nil
}

// serveLoader runs a Loader fed, through its informer handlers, with every SidecarSet of store, and
// returns once its first snapshot serves them all; stop ends its loop.
func serveLoader(tb testing.TB, store toolscache.Indexer) (stop func()) {
	tb.Helper()
	metrics, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(tb, err)
	eng := &engine.Engine{}
	st, err := New(eng, Options{Metrics: metrics, Logger: funcr.New(func(string, string) {}, funcr.Options{})})
	require.NoError(tb, err)
	handlers := newHandlers(st, heapBenchNamespace, heapBenchNamespace)
	objs := store.List()
	for _, obj := range objs {
		for _, h := range handlers {
			h.handler.OnAdd(obj, true) // each handler takes its kind
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = st.Start(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	st.SetClusterSynced()
	// Generous: the machine may be busy, and every allocation is profiled.
	deadline := time.Now().Add(30 * time.Minute)
	for st.Ready() != nil {
		if time.Now().After(deadline) {
			stop()
			tb.Fatalf("no snapshot after 30 minutes: %v", st.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *v1beta1.SidecarSet:
			if _, ok := eng.Current().SidecarSet(o.Name); !ok {
				stop()
				tb.Fatalf("the snapshot lacks SidecarSet %s", o.Name)
			}
		case *appsv1.ControllerRevision:
			if _, ok := eng.Current().History().ByName(o.Name); !ok {
				stop()
				tb.Fatalf("the snapshot lacks ControllerRevision %s", o.Name)
			}
		}
	}
	return stop
}

// liveByHolder collects garbage and returns the live heap by holder (heapHolders, "other"), from
// the heap profile's inuse_space (runtime/pprof: its stacks, unlike runtime.MemProfile's, are deep
// enough to reach the holders' functions from inside OPA's parser), and in all, from runtime.MemStats.
func liveByHolder(tb testing.TB) (map[string]int64, uint64) {
	tb.Helper()
	// The second cycle frees what finalizers of the first released; the profile is published as of
	// the last one.
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var buf bytes.Buffer
	require.NoError(tb, pprof.Lookup("heap").WriteTo(&buf, 0))
	p, err := profile.Parse(&buf)
	require.NoError(tb, err)
	inuse := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "inuse_space" })
	require.GreaterOrEqual(tb, inuse, 0, "the heap profile has no inuse_space")
	out := map[string]int64{}
	for _, s := range p.Sample {
		out[holderOf(s.Location)] += s.Value[inuse]
	}
	return out, ms.HeapAlloc
}

// holderOf names the first holder of heapHolders with a function on stack, else "other".
func holderOf(stack []*profile.Location) string {
	best := len(heapHolders)
	for _, loc := range stack {
		for _, line := range loc.Line {
			for i, h := range heapHolders[:best] {
				if slices.ContainsFunc(h.funcs, func(fn string) bool {
					return line.Function.Name == fn || strings.HasPrefix(line.Function.Name, fn+".func") // or a closure in it
				}) {
					best = i
					break
				}
			}
		}
	}
	if best == len(heapHolders) {
		return "other"
	}
	return heapHolders[best].name
}
