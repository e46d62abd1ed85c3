package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/testing/fleet"
	"github.com/sidecarops/sidecarops/test/bench/perfinputs"
)

// benchFleet is internal/testing/fleet's SidecarSets, the workload of every benchmark.
func benchFleet(tb testing.TB, n, matching int) []*v1beta1.SidecarSet {
	tb.Helper()
	sets, err := fleet.SidecarSets(n, matching)
	if err != nil {
		tb.Fatal(err)
	}
	return sets
}

// discardWriter is the cheapest http.ResponseWriter, so the benchmarks measure the webhook, not a
// recorder.
type discardWriter struct{ header http.Header }

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// serveLoop posts body to h b.N times.
func serveLoop(b *testing.B, h http.Handler, body []byte) {
	r := httptest.NewRequest(http.MethodPost, PodPath, nil)
	r.Header.Set("Content-Type", "application/json")
	rd := bytes.NewReader(body)
	w := &discardWriter{header: http.Header{}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rd.Reset(body)
		r.Body = io.NopCloser(rd)
		h.ServeHTTP(w, r)
	}
}

// BenchmarkPodInjector is one pod admission through the http.Handler Register mounts (the
// PodInjector itself): AdmissionReview decoding, pod decoding, the decision among 100 SidecarSets (1 matching), the
// injection, the patch and the response encoding, with metrics on and the decision log off. As in the
// manager, the namespace's Pod Security labels are looked up; it enforces none.
func BenchmarkPodInjector(b *testing.B) {
	benchmarkPodInjector(b, map[string]string{})
}

// BenchmarkPodInjectorPodSecurity is BenchmarkPodInjector in a namespace enforcing restricted: the
// injected pod is built and checked before and after injection, and no pod is answered from the cache.
func BenchmarkPodInjectorPodSecurity(b *testing.B) {
	benchmarkPodInjector(b, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
}

func benchmarkPodInjector(b *testing.B, shop map[string]string) {
	eng := newEngine(b, policyState{sidecarSets: benchFleet(b, 100, 1)})
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(b, err)
	h := &PodInjector{Snapshots: eng, Injector: fixedInjector(), Metrics: m,
		PodSecurity: &PodSecurity{Namespaces: namespaceLabels{"shop": shop}}}
	body := review(b, podRequest(b, "shop", fleet.Pod()))

	resp := post(b, h, body)
	require.True(b, resp.Allowed)
	require.NotEmpty(b, resp.Patch, "the matching SidecarSet is injected")

	serveLoop(b, h, body)
}

// BenchmarkPodReviewCodec is the floor under BenchmarkPodInjector: the same AdmissionReview read
// and decoded and an answer encoded as the pod webhook does, with no pod decoding, no decision and no
// injection.
func BenchmarkPodReviewCodec(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := buffers.Get().(*bytes.Buffer)
		defer putBuffer(body)
		if _, resp, _ := readBody(r, body, nil); resp != nil {
			b.Fatal(resp.message)
		}
		req, resp, ok := decodeReview(r, body.Bytes())
		if !ok {
			b.Fatal(resp.message)
		}
		resp = allowed("")
		_, _ = w.Write(appendReview(nil, req.UID, &resp))
	})
	body := review(b, podRequest(b, "shop", fleet.Pod()))
	serveLoop(b, h, body)
}

// BenchmarkAdmissionReviewCodec is the same floor through controller-runtime's admission.Webhook,
// which the SidecarSet webhooks use and the pod webhook used before it decoded reviews itself.
func BenchmarkAdmissionReviewCodec(b *testing.B) {
	h := &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})}
	body := review(b, podRequest(b, "shop", fleet.Pod()))
	require.True(b, post(b, h, body).Allowed)
	serveLoop(b, h, body)
}

// BenchmarkPodInjectorPerPod is issue 15's webhook case: the whole handler (no TLS) on the
// generator's inputs, N = 10 SidecarSets of which one matches, for a stream of distinct pods (no two
// a cache could answer alike) and for a ReplicaSet's burst of 100 pods of one template.
// deepcopies/op is the time per review over that of one deep copy of the pod.
func BenchmarkPodInjectorPerPod(b *testing.B) {
	in := perfinputs.For(b, 10)
	snap, err := injector.Snapshot(context.Background(), injector.Policies{State: bundles.State{SidecarSets: in.SidecarSets, Namespaces: in.Namespaces}})
	require.NoError(b, err)
	eng := &engine.Engine{}
	eng.Swap(snap)
	for _, stream := range []struct {
		name string
		pods []perfinputs.Variant
		// unseen gives each pass over the stream a fresh handler, hence cache (perfinputs.DistinctStream).
		unseen bool
	}{{"distinct", perfinputs.DistinctPods(b, in.Pod, perfinputs.DistinctStream), true}, {"burst", perfinputs.BurstPods(b, in.Pod, 100), false}} {
		bodies := make([][]byte, len(stream.pods))
		for i, v := range stream.pods {
			bodies[i] = review(b, podRequest(b, v.Pod.Namespace, v.Pod))
		}
		resp := post(b, &PodInjector{Snapshots: eng, Injector: fixedInjector()}, bodies[0])
		require.True(b, resp.Allowed)
		require.NotEmpty(b, resp.Patch, "the matching SidecarSet is injected")
		b.Run(fmt.Sprintf("sidecarsets=10/%s", stream.name), func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, PodPath, nil)
			r.Header.Set("Content-Type", "application/json")
			rd := &bytes.Reader{}
			w := &discardWriter{header: http.Header{}}
			var h *PodInjector
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == 0 || stream.unseen && i%len(bodies) == 0 {
					h = &PodInjector{Snapshots: eng, Injector: fixedInjector()}
				}
				rd.Reset(bodies[i%len(bodies)])
				i++
				r.Body = io.NopCloser(rd)
				h.ServeHTTP(w, r)
			}
			perfinputs.ReportDeepCopies(b, in.Pod)
		})
	}
}

// BenchmarkPodInjectorAfterOpenKruise is BenchmarkPodInjector's admission on migration path B: the
// pod arrives injected by OpenKruise's pod webhook (the same injection) and PodInjector.AfterOpenKruise
// takes that back, decides and injects again, and answers the difference (none). "alone" is the same
// handler on the pod as its author sent it, without AfterOpenKruise and without the per-pod cache,
// which AfterOpenKruise never uses, for comparison.
func BenchmarkPodInjectorAfterOpenKruise(b *testing.B) {
	eng := newEngine(b, policyState{sidecarSets: benchFleet(b, 100, 1)})
	pod := fleet.Pod()
	res, err := injector.Pod(context.Background(), eng.Current(), fixedInjector(), injector.PodRequest{Pod: pod.DeepCopy(), Namespace: "shop"})
	require.NoError(b, err)
	require.Equal(b, injector.Injected, res.Outcome)
	for _, tc := range []struct {
		name  string
		h     *PodInjector
		body  []byte
		patch bool
	}{
		{"alone", &PodInjector{Snapshots: eng, Injector: fixedInjector(), NoInjectionCache: true}, review(b, podRequest(b, "shop", pod)), true},
		{"after-openkruise", &PodInjector{Snapshots: eng, Injector: fixedInjector(), AfterOpenKruise: true}, review(b, podRequest(b, "shop", res.Pod)), false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			resp := post(b, tc.h, tc.body)
			require.True(b, resp.Allowed)
			require.Equal(b, tc.patch, len(resp.Patch) > 0)
			serveLoop(b, tc.h, tc.body)
		})
	}
}
