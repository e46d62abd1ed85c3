package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Register mounts the handlers on a controller-runtime webhook server at the exported paths (the
// paths config/webhook names); the server is not started, its mux is called directly.
func TestRegister(t *testing.T) {
	eng := newEngine(t, policyState{
		sidecarSets: []*v1beta1.SidecarSet{ss1()},
		admin:       []*bundle.Bundle{whitelistBundle(`^allowed\.example\.com/`)},
	})
	m, err := NewMetrics(nil)
	require.NoError(t, err, "controller-runtime's registry")
	_, err = NewMetrics(nil)
	require.NoError(t, err, "registering twice reuses the collectors")

	server := crwebhook.NewServer(crwebhook.Options{})
	Register(server, NewHandlers(eng, m, logr.Discard()))

	call := func(path string, body []byte) (int, *admissionv1.AdmissionResponse) {
		r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		server.WebhookMux().ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			return w.Code, nil
		}
		var out admissionv1.AdmissionReview
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out))
		return w.Code, out.Response
	}

	_, resp := call(PodPath, review(t, podRequest(t, "default", podP1())))
	require.NotNil(t, resp)
	assert.True(t, resp.Allowed)
	assert.NotEmpty(t, resp.Patch, "the pod is injected")

	_, resp = call(SidecarSetDefaultPath, review(t, sidecarSetRequest(t, admissionv1.Create, minimalSidecarSet("new", "web", "agent"), nil)))
	require.NotNil(t, resp)
	assert.True(t, resp.Allowed)
	assert.NotEmpty(t, resp.Patch, "the SidecarSet is defaulted")

	_, resp = call(SidecarSetValidatePath, review(t, sidecarSetRequest(t, admissionv1.Create, v21("sidecarset1"), nil)))
	require.NotNil(t, resp)
	assert.True(t, resp.Allowed, "the same name is an update of itself, not a conflict: %v", resp.Result)

	conflicting := ss1()
	conflicting.Name = "sidecarset2"
	_, resp = call(SidecarSetValidatePath, review(t, sidecarSetRequest(t, admissionv1.Create, conflicting, nil)))
	require.NotNil(t, resp)
	assert.False(t, resp.Allowed)
	assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code)
	assert.Contains(t, resp.Result.Message, "already exist in sidecarset1")

	// A nil handler is not mounted.
	only := crwebhook.NewServer(crwebhook.Options{})
	Register(only, Handlers{Defaulter: &SidecarSetDefaulter{}})
	r := httptest.NewRequest(http.MethodPost, PodPath, bytes.NewReader(review(t, podRequest(t, "default", podP1()))))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	only.WebhookMux().ServeHTTP(w, r)
	assert.Equal(t, http.StatusNotFound, w.Code)
}

// Concurrent admissions while the engine swaps snapshots: each request works with the one snapshot
// it took, so every answer is one of the two snapshots' answers. Run with -race.
func TestConcurrentAdmissionsDuringSwaps(t *testing.T) {
	eng := newEngine(t, policyState{sidecarSets: []*v1beta1.SidecarSet{ss1()}})
	injecting := eng.Current()
	empty := newEngine(t, policyState{}).Current()
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	h := httpHandler(&PodInjector{Snapshots: eng, Metrics: m})
	body := review(t, podRequest(t, "default", podP1()))

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			if i%2 == 0 {
				eng.Swap(empty)
			} else {
				eng.Swap(injecting)
			}
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				r := httptest.NewRequest(http.MethodPost, PodPath, bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				var out admissionv1.AdmissionReview
				if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil || !out.Response.Allowed {
					t.Errorf("unexpected answer: %s", w.Body.Bytes())
					return
				}
			}
		}()
	}
	wg.Wait()
	<-done
	assert.Equal(t, float64(100), testutil.ToFloat64(m.decisions.WithLabelValues(ResultPatched))+
		testutil.ToFloat64(m.decisions.WithLabelValues(ResultNotMatched)))
}
