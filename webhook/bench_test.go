package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarops/sidecarops/api/v1alpha1"

	"github.com/sidecarops/sidecarops/internal/fleet"
)

// benchFleet is internal/fleet's SidecarSets, the workload of every benchmark.
func benchFleet(tb testing.TB, n, matching int) []*v1alpha1.SidecarSet {
	tb.Helper()
	sets, err := fleet.SidecarSets(n, matching)
	if err != nil {
		tb.Fatal(err)
	}
	return sets
}

// benchPod is test/bench's pod: a Deployment's pod, named by generateName, as the API server sends it.
func benchPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "web-7d9c8-", Namespace: "shop",
			Labels:      map[string]string{"app": "web", "pod-template-hash": "7d9c8", "version": "v3"},
			Annotations: map[string]string{"prometheus.io/scrape": "true"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "web", Image: "nginx:1.27",
				Ports:        []corev1.ContainerPort{{ContainerPort: 8080}},
				Env:          []corev1.EnvVar{env("LOG_LEVEL", "info")},
				VolumeMounts: []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log/nginx"}},
			}},
			Volumes: []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
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

// BenchmarkPodInjector is one pod admission through the http.Handler controller-runtime mounts:
// AdmissionReview decoding, pod decoding, the decision among 100 SidecarSets (1 matching), the
// injection, the patch and the response encoding, with metrics on and the decision log off.
func BenchmarkPodInjector(b *testing.B) {
	eng := newEngine(b, policyState{sidecarSets: benchFleet(b, 100, 1)})
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(b, err)
	h := &admission.Webhook{Handler: &PodInjector{Snapshots: eng, Injector: fixedInjector(), Metrics: m}}
	body := review(b, podRequest(b, "shop", benchPod()))

	resp := post(b, h, body)
	require.True(b, resp.Allowed)
	require.NotEmpty(b, resp.Patch, "the matching SidecarSet is injected")

	serveLoop(b, h, body)
}

// BenchmarkAdmissionReviewCodec is the floor under BenchmarkPodInjector: the same AdmissionReview
// decoded and an answer encoded by controller-runtime, with no decision and no injection.
func BenchmarkAdmissionReviewCodec(b *testing.B) {
	h := &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})}
	body := review(b, podRequest(b, "shop", benchPod()))
	require.True(b, post(b, h, body).Allowed)
	serveLoop(b, h, body)
}
