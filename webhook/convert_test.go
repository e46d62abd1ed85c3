package webhook

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apixv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// conversionHandler is the manager's conversion handler (package manager): controller-runtime's,
// over the API types' conversions.
func conversionHandler(t *testing.T) http.Handler {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, v1beta1.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	return crconversion.NewWebhookHandler(s, crconversion.NewRegistry())
}

const v1alpha1SidecarSet = `{"apiVersion":"apps.kruise.io/v1alpha1","kind":"SidecarSet","metadata":{"name":"log","uid":"u1"},` +
	`"spec":{"namespace":"shop","containers":[{"name":"agent","image":"agent:1"}]}}`

// conversionReviewOf is a ConversionReview of objects to v1beta1, as the API server sends it.
func conversionReviewOf(objects ...string) string {
	return `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"r1",` +
		`"desiredAPIVersion":"apps.kruise.io/v1beta1","objects":[` + strings.Join(objects, ",") + `]}}`
}

func TestConvert(t *testing.T) {
	srv := serve(t, Handlers{Converter: conversionHandler(t)})
	for _, tc := range []struct {
		name              string
		body              string
		code              int
		message           string // of the plain answer, or of the review's failed result
		namespaceSelected string // of the converted SidecarSet, when it converts
	}{
		{name: "converted", body: conversionReviewOf(v1alpha1SidecarSet), code: http.StatusOK, namespaceSelected: "shop"},
		// Issue 28, item 9: controller-runtime's handler took the last of two members and converted.
		{name: "a member twice in an object", body: conversionReviewOf(strings.Replace(v1alpha1SidecarSet, `"namespace":"shop"`, `"namespace":"shop","namespace":"kube-system"`, 1)),
			code: http.StatusOK, message: `duplicate object member name "namespace"`},
		// Issue 28, item 9: these were a bare 400 with an empty body.
		{name: "not JSON", body: `{"apiVersion":`, code: http.StatusBadRequest, message: "decoding the ConversionReview"},
		{name: "no request", body: `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, code: http.StatusBadRequest, message: "the ConversionReview has no request"},
		{name: "another kind", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"r1"}}`, code: http.StatusBadRequest,
			message: `unsupported apiVersion "admission.k8s.io/v1" kind "AdmissionReview": this webhook serves apiextensions.k8s.io/v1 ConversionReview`},
		{name: "an empty body", body: ``, code: http.StatusBadRequest, message: "request body is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := srv.Client().Post(srv.URL+ConvertPath, "application/json", strings.NewReader(tc.body))
			require.NoError(t, err)
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.code, resp.StatusCode, "%s", raw)
			if tc.code != http.StatusOK {
				assert.Contains(t, string(raw), tc.message)
				return
			}
			var rv apixv1.ConversionReview
			require.NoError(t, json.Unmarshal(raw, &rv), "%s", raw)
			require.NotNil(t, rv.Response)
			assert.Equal(t, "r1", string(rv.Response.UID))
			if tc.message != "" {
				assert.Equal(t, metav1.StatusFailure, rv.Response.Result.Status)
				assert.Contains(t, rv.Response.Result.Message, tc.message)
				assert.Empty(t, rv.Response.ConvertedObjects)
				return
			}
			require.Equal(t, metav1.StatusSuccess, rv.Response.Result.Status, rv.Response.Result.Message)
			require.Len(t, rv.Response.ConvertedObjects, 1)
			var got v1beta1.SidecarSet
			require.NoError(t, json.Unmarshal(rv.Response.ConvertedObjects[0].Raw, &got))
			require.NotNil(t, got.Spec.NamespaceSelector)
			assert.Equal(t, tc.namespaceSelected, got.Spec.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
		})
	}
}

// growingReview is a chunked ConversionReview whose one string goes on for left bytes. The
// client's transport may still be reading it after the answer arrived.
type growingReview struct {
	head io.Reader
	left atomic.Int64
}

func (g *growingReview) Read(p []byte) (int, error) {
	if n, err := g.head.Read(p); n > 0 || err != io.EOF {
		return n, err
	}
	n := min(int64(len(p)), g.left.Load())
	if n <= 0 {
		return 0, io.EOF
	}
	copy(p, bytes.Repeat([]byte("a"), int(n)))
	g.left.Add(-n)
	return int(n), nil
}

// Issue 28, item 2: /convert read a body of any size (controller-runtime's handler decodes r.Body
// unbounded; only the body deadline stopped it): one chunked review with an ever-growing string
// took the manager past its memory limit. The body is read within the review limit before the
// handler sees it, and answered 413 past it.
func TestConvertBodyIsBounded(t *testing.T) {
	var handled atomic.Int64
	inner := conversionHandler(t)
	srv := serve(t, Handlers{Converter: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		inner.ServeHTTP(w, r)
	}), Limits: Limits{BodyTimeout: time.Minute}})
	body := &growingReview{head: strings.NewReader(conversionReviewOf(`{"apiVersion":"apps.kruise.io/v1alpha1","kind":"SidecarSet","metadata":{"name":"`))}
	body.left.Store(4 * maxReviewSize)
	req, err := http.NewRequest(http.MethodPost, srv.URL+ConvertPath, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	require.Equal(t, int64(0), req.ContentLength, "chunked: the size is not declared")
	resp, err := srv.Client().Do(req)
	if err == nil { // the answer may come while the body is still being sent, or the send fail first
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", raw)
		assert.Contains(t, string(raw), "request entity is too large")
	}
	assert.Zero(t, handled.Load(), "the conversion handler was given a body over the limit")
	assert.Greater(t, body.left.Load(), int64(2*maxReviewSize), "the server read far past the limit")
}
