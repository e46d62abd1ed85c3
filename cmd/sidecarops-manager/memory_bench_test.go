package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/testing/fleet"
	"github.com/sidecarops/sidecarops/webhook"
)

// ballastNode is a piece of a live heap shaped like the manager's caches: small objects full of
// pointers, which the GC has to mark one by one.
type ballastNode struct {
	next  *ballastNode
	label *string
	_     [112]byte
}

// ballast allocates a linked list of about size bytes, live until the returned list is dropped.
func ballast(size int) *ballastNode {
	var head *ballastNode
	label := "ballast"
	for range size / 128 {
		head = &ballastNode{next: head, label: &label}
	}
	return head
}

// BenchmarkAdmissionGC is the CPU price of the manager's GC settings on the pod webhook: one pod
// admission through the pod webhook's handler (no TLS) deciding among 1,000 SidecarSets (one
// matching), in a process whose live heap is otherwise small (live=small) or holds 48 MiB more
// (live=48MiB, about what the manager holds with 1,000 SidecarSets and 10,000 pods), under
// --gc-percent 400 throughout (gc=400, the setting before issue 14's memory bound), under
// --gc-heap-target 96Mi (gc=96Mi, the default before pods were cached compacted) and under the
// default --gc-heap-target (gc=tuned). cpu-µs/admission is the whole process's CPU (getrusage:
// the GC's background workers included) per admission. Cheap to run:
//
//	go test ./cmd/sidecarops-manager/ -run '^$' -bench AdmissionGC -benchtime 20000x -count 3
func BenchmarkAdmissionGC(b *testing.B) {
	sets, err := fleet.SidecarSets(1000, 1)
	require.NoError(b, err)
	snap, err := injector.Snapshot(context.Background(), injector.Policies{State: bundles.State{SidecarSets: sets}})
	require.NoError(b, err)
	eng := &engine.Engine{}
	eng.Swap(snap)
	h := webhook.NewHandlers(eng, nil, logr.Discard()).PodInjector
	pod := fleet.Pod()
	raw, err := json.Marshal(pod)
	require.NoError(b, err)
	podGVK := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	podGVR := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("uid"), Kind: podGVK, Resource: podGVR, RequestKind: &podGVK, RequestResource: &podGVR,
			Namespace: pod.Namespace, Operation: admissionv1.Create, Object: kruntime.RawExtension{Raw: raw},
		},
	})
	require.NoError(b, err)
	var answer admissionv1.AdmissionReview
	require.NoError(b, json.Unmarshal(serve(h, body), &answer))
	require.NotEmpty(b, answer.Response.Patch, "the matching SidecarSet is injected")
	tuned, err := quantity("--gc-heap-target", DefaultGCHeapTarget)
	require.NoError(b, err)

	for _, live := range []struct {
		name  string
		bytes int
	}{{"small", 0}, {"48MiB", 48 << 20}} {
		for _, gc := range []struct {
			name   string
			target int64
		}{{"400", 0}, {"96Mi", 96 << 20}, {"tuned", tuned}} {
			b.Run(fmt.Sprintf("live=%s/gc=%s", live.name, gc.name), func(b *testing.B) {
				keep := ballast(live.bytes)
				defer debug.SetGCPercent(debug.SetGCPercent(100))
				stop := memorySettings{gcPercent: DefaultGCPercent, heapTarget: gc.target}.apply()
				defer stop()
				runtime.GC() // the tuner sees the ballast
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				cpu0 := processCPUTime(b)
				start := time.Now()
				for b.Loop() {
					serve(h, body)
				}
				cpu := processCPUTime(b) - cpu0
				wall := time.Since(start)
				runtime.ReadMemStats(&ms1)
				runtime.KeepAlive(keep)
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/admission")
				b.ReportMetric(float64(cpu)/float64(wall), "CPUs")
				b.ReportMetric(float64(ms1.NumGC-ms0.NumGC), "GCs")
				b.ReportMetric(float64(ms1.HeapSys-ms1.HeapReleased)/(1<<20), "heap-MiB")
			})
		}
	}
}

// serve posts body to h and returns the answer's body.
func serve(h http.Handler, body []byte) []byte {
	r := httptest.NewRequest(http.MethodPost, webhook.PodPath, io.NopCloser(bytes.NewReader(body)))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Body.Bytes()
}

// processCPUTime is this process's user + system CPU time so far.
func processCPUTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
