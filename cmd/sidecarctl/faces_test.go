package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/loader"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/testing/readonly"
	"github.com/sidecarops/sidecarops/mutation"
	"github.com/sidecarops/sidecarops/sidecarset/versions"
	"github.com/sidecarops/sidecarops/webhook"
)

// TestCLIAndWebhookAnswerTheSamePatch runs every example's workloads through `sidecarctl inject
// --patch` and, as pods being created, through the pod webhook's handler fed by the manager's
// policy loader: the two faces share one injection path, so the patches must be identical, the
// CLI's leading into the workload's pod template.
func TestCLIAndWebhookAnswerTheSamePatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  []string
		bundle string // an administrators' bundle both faces load
	}{
		{name: "logging", files: []string{"examples/logging"}},
		{name: "hot upgrade", files: []string{"examples/envoy-hotupgrade"}},
		{name: "namespace selector", files: []string{"examples/namespace-selector"}},
		{name: "patch metadata", files: []string{"examples/patch-metadata"}, bundle: "examples/whitelist-bundle"},
		// The directory holds a kustomization.yaml, which is skipped.
		{name: "agent", files: []string{"examples/sidecar-agent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"inject", "--patch", "-o", "json", "--timestamp", ts}
			paths := make([]string, len(tc.files))
			for i, f := range tc.files {
				args = append(args, "-f", f)
				paths[i] = filepath.Join("..", "..", f)
			}
			if tc.bundle != "" {
				args = append(args, "--bundle", tc.bundle)
			}
			out, errOut, code := sidecarctl(t, "", args...)
			require.Equal(t, 0, code, errOut)
			var cli []struct {
				Kind, Namespace, Name string
				Patch                 json.RawMessage
			}
			require.NoError(t, json.Unmarshal([]byte(out), &cli))

			h := webhookFor(t, paths, tc.bundle)
			objs, err := manifest.Read(nil, paths...)
			require.NoError(t, err)
			i, injected := 0, 0
			for _, o := range objs {
				if !manifest.IsWorkload(o.Obj) {
					continue
				}
				require.Less(t, i, len(cli), "the CLI printed fewer patches than there are workloads")
				pod, _ := manifest.PodTemplate(o.Obj, "default")
				got := admitPod(t, h, pod)
				template, _ := manifest.PodTemplatePointer(o.Obj)
				assert.Equal(t, string(compact(t, cli[i].Patch)), string(atPath(t, template, got)), "%s (%s/%s)", o, cli[i].Namespace, cli[i].Name)
				if string(compact(t, got)) != "[]" {
					injected++
				}
				i++
			}
			assert.Equal(t, len(cli), i, "the CLI printed a patch per workload")
			assert.Positive(t, injected, "the example injects nothing, so it proves nothing")
		})
	}
}

// webhookFor returns the pod webhook serving a snapshot that internal/loader compiled from the
// objects in paths (and the administrators' bundle at adminBundle, relative to the repository
// root), as the manager's informers would feed it.
func webhookFor(t *testing.T, paths []string, adminBundle string) http.Handler {
	t.Helper()
	objs, err := manifest.Read(nil, paths...)
	require.NoError(t, err)
	var eng engine.Engine
	m, err := loader.NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	l, err := loader.New(&eng, loader.Options{Debounce: time.Millisecond, Logger: logr.Discard(), Metrics: m})
	require.NoError(t, err)
	if adminBundle != "" {
		b, err := bundles.Read(filepath.Join("..", "..", adminBundle), nil)
		require.NoError(t, err)
		require.NoError(t, l.RegisterSource("admin"))
		require.NoError(t, l.SetBundle("admin", b))
	}
	for _, o := range objs {
		switch obj := o.Obj.(type) {
		case *v1alpha1.SidecarSet, *v1beta1.SidecarSet:
			// The API server stores either as v1beta1, which is what the manager's cache holds.
			w, err := versions.Of(obj)
			require.NoError(t, err)
			readonly.Guard(t, w.Hub) // held as the informer's object is: read-only
			require.NoError(t, l.SetSidecarSet(w.Hub))
		case *corev1.Namespace:
			l.SetNamespace(obj)
		case *appsv1.ControllerRevision:
			readonly.Guard(t, obj)
			l.SetRevision(obj)
		case *corev1.ConfigMap:
			l.SetConfigMap(obj)
		}
	}
	l.SetClusterSynced()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NoError(c, l.Ready()) }, 10*time.Second, 5*time.Millisecond)

	at, err := time.Parse(time.RFC3339, ts)
	require.NoError(t, err)
	// Partial revision injection is the only random choice; no example uses it, and the CLI's
	// random source would make a test of it flaky, not wrong.
	return &webhook.PodInjector{Snapshots: &eng, Injector: &mutation.Injector{Now: func() time.Time { return at }, Rand: func() float64 { return 0 }}}
}

// admitPod sends pod's creation to h as the API server would and returns the answered patch.
func admitPod(t *testing.T, h http.Handler, pod *corev1.Pod) json.RawMessage {
	t.Helper()
	resp := podResponse(t, h, pod)
	if resp.Patch == nil {
		return json.RawMessage("[]")
	}
	return resp.Patch
}

// podResponse sends pod's creation to h as the API server would and returns the answer, which
// must admit it.
func podResponse(t *testing.T, h http.Handler, pod *corev1.Pod) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID(fmt.Sprintf("uid-%s", pod.Name)),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: pod.Namespace,
			Name:      pod.Name,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(review)
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, webhook.PodPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var resp admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
	require.NotNil(t, resp.Response)
	require.True(t, resp.Response.Allowed, "%+v", resp.Response.Result)
	return resp.Response
}

// atPath moves a pod's patch to where a workload keeps its pod template, leaving every value's
// bytes as the webhook wrote them.
func atPath(t *testing.T, pointer string, podPatch []byte) []byte {
	t.Helper()
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value,omitempty"`
	}
	require.NoError(t, json.Unmarshal(podPatch, &ops))
	for i := range ops {
		ops[i].Path = pointer + ops[i].Path
	}
	out, err := json.Marshal(ops)
	require.NoError(t, err)
	return compact(t, out)
}

func compact(t *testing.T, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.Compact(&buf, raw))
	return buf.Bytes()
}
