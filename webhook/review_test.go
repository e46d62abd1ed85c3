package webhook

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	admissionmetrics "sigs.k8s.io/controller-runtime/pkg/webhook/admission/metrics"

	"github.com/sidecarops/sidecarops/engine"
)

// The pod webhook's answers are byte for byte what encoding/json writes for the same
// admissionv1.AdmissionReview (what controller-runtime answered before the handler wrote its own).
func TestAppendReviewMatchesEncodingJSON(t *testing.T) {
	container := corev1.Container{Name: "agent", Image: "example.com/a<b>&c:1.0", Args: []string{"--x=\"q\"\n", "ünïcode \u2028"}}
	patch := []jsonpatch.JsonPatchOperation{
		{Operation: "add", Path: "/spec/containers/1", Value: container},
		{Operation: "add", Path: "/metadata/annotations/a~1b", Value: nil},
		{Operation: "replace", Path: "/spec/x", Value: map[string]any{"k": []int{1, 2}}},
		{Operation: "remove", Path: "/spec/y"},
	}
	for name, resp := range map[string]reviewResponse{
		"allowed":  allowed(""),
		"patched":  {allowed: true, code: 200, patch: patch},
		"gated":    {allowed: true, code: 200, message: `denied by policy: "<x>" & \ y`, warnings: []string{"w1 ✓", "w2\t<tab>"}},
		"denied":   denied("sidecar injection failed: SidecarSet \"a\" spec.x"),
		"errored":  errored(http.StatusServiceUnavailable, errNotLoaded),
		"bad utf8": allowed("bad \xff byte"),
	} {
		t.Run(name, func(t *testing.T) {
			uid := "0e1f-<uid>"
			got := appendReview(nil, "0e1f-<uid>", &resp)

			want := admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Response: &admissionv1.AdmissionResponse{
					UID: "0e1f-<uid>", Allowed: resp.allowed, Warnings: resp.warnings,
					Result: &metav1.Status{Code: resp.code, Reason: resp.reason, Message: resp.message},
				},
			}
			if len(resp.patch) > 0 {
				var err error
				want.Response.Patch, err = json.Marshal(resp.patch)
				require.NoError(t, err)
				pt := admissionv1.PatchTypeJSONPatch
				want.Response.PatchType = &pt
			}
			var buf bytes.Buffer
			require.NoError(t, json.NewEncoder(&buf).Encode(want))
			assert.Equal(t, buf.String(), string(got), uid)
		})
	}
}

// A patch whose values cannot be encoded is answered with a 500 naming the fault, and the writer it
// went through (pooled between requests) answers the next request with nothing of it left over.
func TestAppendReviewUnencodablePatch(t *testing.T) {
	bad := reviewResponse{allowed: true, code: 200, patch: []jsonpatch.JsonPatchOperation{
		{Operation: "add", Path: "/metadata/labels/a", Value: "fine"},
		{Operation: "add", Path: "/spec/x", Value: math.Inf(1)},
	}}
	var got admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(appendReview(nil, "u1", &bad), &got))
	assert.False(t, got.Response.Allowed)
	assert.Equal(t, int32(http.StatusInternalServerError), got.Response.Result.Code)
	assert.Contains(t, got.Response.Result.Message, "unable to encode the patch: json: unsupported value: +Inf")
	assert.Empty(t, got.Response.Patch)

	for range 3 { // whichever pooled writer serves it
		good := reviewResponse{allowed: true, code: 200, patch: bad.patch[:1]}
		require.NoError(t, json.Unmarshal(appendReview(nil, "u2", &good), &got))
		assert.JSONEq(t, `[{"op":"add","path":"/metadata/labels/a","value":"fine"}]`, string(got.Response.Patch))
	}
}

// The review's object is read in place: exactly the value's bytes in the body, whatever the layout
// around it, the last one when the name is repeated, and nothing when it is absent.
func TestDecodeReviewObjectInPlace(t *testing.T) {
	const head = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":`
	cases := []struct {
		name, request, want string
	}{
		{"compact", `{"uid":"u","object":{"metadata":{"name":"p"}},"namespace":"n"}`, `{"metadata":{"name":"p"}}`},
		{"spaced", "{\"uid\" : \"u\" ,\n  \"object\" :\t\r\n {\"a\": [1, \"}\"] }  ,\"namespace\":\"n\"}", `{"a": [1, "}"] }`},
		{"last of two", `{"object":{"first":1},"uid":"u","object":{"second":2}}`, `{"second":2}`},
		{"escaped strings", `{"object":{"k\"ey":"v\\\"al\u00e9"}}`, `{"k\"ey":"v\\\"al\u00e9"}`},
		{"null", `{"object":null}`, `null`},
		{"absent", `{"uid":"u"}`, ``},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(head + tc.request + "}\n")
			r := httptest.NewRequest(http.MethodPost, PodPath, nil)
			r.Header.Set("Content-Type", "application/json")
			req, _, ok := decodeReview(r, body)
			require.True(t, ok)
			assert.Equal(t, tc.want, string(req.Object))
			if len(req.Object) > 0 { // the body's own bytes, not a copy
				at := bytes.Index(body, []byte(tc.want))
				assert.Same(t, &body[at], &req.Object[0])
			}
		})
	}
}

// Requests the pod webhook refuses before looking at the pod: a clean 400 (413 for a huge body)
// in an AdmissionReview with HTTP 200, never a panic.
func TestPodReviewRefused(t *testing.T) {
	h := httpHandler(&PodInjector{Snapshots: podEngine(t)})
	v1 := review(t, podRequest(t, "default", podP1()))
	call := func(body []byte, contentType string) *admissionv1.AdmissionResponse {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, PodPath, bytes.NewReader(body))
		if body == nil {
			r.Body = http.NoBody
		}
		r.Header.Set("Content-Type", contentType)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
		var out admissionv1.AdmissionReview
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out), w.Body.String())
		assert.Equal(t, "admission.k8s.io/v1", out.APIVersion)
		assert.Equal(t, "AdmissionReview", out.Kind)
		require.NotNil(t, out.Response)
		require.NotNil(t, out.Response.Result)
		return out.Response
	}

	ok := call(v1, "application/json")
	assert.True(t, ok.Allowed)
	assert.NotEmpty(t, ok.Patch)
	assert.Equal(t, int32(200), ok.Result.Code)

	for name, tc := range map[string]struct {
		body        []byte
		contentType string
		code        int32
		message     string
	}{
		"v1beta1 review": {bytes.Replace(v1, []byte(`"admission.k8s.io/v1"`), []byte(`"admission.k8s.io/v1beta1"`), 1),
			"application/json", 400, `unsupported apiVersion "admission.k8s.io/v1beta1"`},
		"no apiVersion":  {[]byte(`{"kind":"AdmissionReview","request":{"uid":"x"}}`), "application/json", 400, "unsupported apiVersion"},
		"not a review":   {[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"x"}}`), "application/json", 400, `kind "Pod"`},
		"no request":     {[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), "application/json", 400, "has no request"},
		"null object":    {[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","resource":{"version":"v1","resource":"pods"},"object":null}}`), "application/json", 400, "the request has no pod"},
		"capitals":       {bytes.Replace(v1, []byte(`"apiVersion"`), []byte(`"APIVersion"`), 1), "application/json", 400, "unsupported apiVersion"},
		"content type":   {v1, "application/yaml", 400, "expected application/json"},
		"empty body":     {nil, "application/json", 400, "request body is empty"},
		"too large":      {append(append([]byte(`{"apiVersion":"`), bytes.Repeat([]byte("x"), maxReviewSize)...), `"}`...), "application/json", 413, "too large"},
		"truncated":      {v1[:len(v1)/2], "application/json", 400, "decoding the AdmissionReview"},
		"uid not string": {[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":1}}`), "application/json", 400, "decoding the AdmissionReview"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := call(tc.body, tc.contentType)
			assert.False(t, resp.Allowed)
			assert.Empty(t, resp.Patch)
			assert.Equal(t, tc.code, resp.Result.Code)
			assert.Contains(t, resp.Result.Message, tc.message)
		})
	}
}

// A dry run (kubectl --dry-run=server) is answered as any other creation, and the API server shows
// the injected pod (the one side effect, PodSecurity's Event, is skipped: TestPodInjectorPodSecurity).
func TestPodInjectorDryRun(t *testing.T) {
	req := podRequest(t, "default", podP1())
	req.DryRun = ptrTo(true)
	resp := admit(t, &PodInjector{Snapshots: podEngine(t), Injector: fixedInjector()}, req)
	require.True(t, resp.Allowed)
	var pod corev1.Pod
	applyPatch(t, resp, req.Object.Raw, &pod)
	assert.Equal(t, []string{"dns-f", "nginx", "log-agent"}, containerNames(pod.Spec.Containers))
}

// A panic in the handler is answered with a 500 carrying the request's uid, as controller-runtime's
// admission.Webhook answers it, and the server keeps serving.
func TestPodInjectorRecoversPanics(t *testing.T) {
	panics := testutil.ToFloat64(admissionmetrics.WebhookPanics.WithLabelValues())
	h := &PodInjector{Snapshots: snapshotsFunc(func() *engine.Snapshot { panic("boom") })}
	req := podRequest(t, "default", podP1())
	r := httptest.NewRequest(http.MethodPost, PodPath, bytes.NewReader(review(t, req)))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code)
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out))
	require.NotNil(t, out.Response)
	assert.Equal(t, req.UID, out.Response.UID)
	assert.False(t, out.Response.Allowed)
	assert.Equal(t, int32(http.StatusInternalServerError), out.Response.Result.Code)
	assert.True(t, strings.HasPrefix(out.Response.Result.Message, "panic: boom"), out.Response.Result.Message)
	assert.Equal(t, panics+1, testutil.ToFloat64(admissionmetrics.WebhookPanics.WithLabelValues()),
		"counted in controller_runtime_webhook_panics_total, as controller-runtime counts its handlers' panics")
}
