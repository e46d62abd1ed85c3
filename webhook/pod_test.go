package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
)

// podEngine holds SS1, a SidecarSet scoped to namespace "shop" by v1alpha1 spec.namespace, one that
// cannot be injected (its MergePatchJson cannot merge into P1's annotation), one whose revision is
// missing, and a gate refusing hostNetwork pods.
func podEngine(t testing.TB) *engine.Engine {
	scoped := minimalSidecarSet("scoped", "scoped", "agent")
	scoped.Spec.NamespaceSelector = v1beta1.NamespaceNamed("shop")

	badMerge := minimalSidecarSet("bad-merge", "bad-merge", "agent")
	badMerge.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{
		Annotations: map[string]string{"config": `{"a":1}`}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy,
	}}

	noRevision := minimalSidecarSet("no-revision", "no-revision", "agent")
	noRevision.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{CustomVersion: ptrTo("v9")}

	return newEngine(t, policyState{
		sidecarSets: []*v1beta1.SidecarSet{ss1(), scoped, badMerge, noRevision},
		admin:       []*bundle.Bundle{gatesBundle(t, hostNetworkGate)},
	})
}

func ptrTo[T any](v T) *T { return &v }

func TestPodInjector(t *testing.T) {
	eng := podEngine(t)
	p1 := func(mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := podP1()
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	withLabel := func(app string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Labels["app"] = app }
	}

	tests := []struct {
		name      string
		snapshots Snapshots // default: eng
		failOpen  bool
		req       func(t *testing.T) admissionv1.AdmissionRequest
		allowed   bool
		code      int32
		message   string // substring of the result message
		// check gets the pod the patch yields; nil when the response must carry no patch.
		check func(t *testing.T, pod *corev1.Pod)
		warn  string
	}{{
		name:    "W15 SS1 injected into P1: containers, sorted init containers, annotations",
		req:     func(t *testing.T) admissionv1.AdmissionRequest { return podRequest(t, "default", p1()) },
		allowed: true, code: 200,
		check: func(t *testing.T, pod *corev1.Pod) {
			assert.Equal(t, []string{"dns-f", "nginx", "log-agent"}, containerNames(pod.Spec.Containers))
			assert.Equal(t, []string{"init-0", "init-1", "init-2"}, containerNames(pod.Spec.InitContainers))
			for _, c := range pod.Spec.InitContainers[1:] {
				assert.Contains(t, c.Env, env(v1beta1.SidecarEnvInjected, "true"), c.Name)
			}
			assert.Equal(t, []corev1.EnvVar{env(v1beta1.SidecarEnvInjected, "true")}, pod.Spec.Containers[0].Env)
			assert.Equal(t, "sidecarset1", pod.Annotations[v1beta1.SidecarSetListAnnotation])

			ss, ok := eng.Current().SidecarSet("sidecarset1")
			require.True(t, ok)
			var hashes map[string]struct {
				Hash            string      `json:"hash"`
				UpdateTimestamp metav1.Time `json:"updateTimestamp"`
				SidecarList     []string    `json:"sidecarList"`
			}
			require.NoError(t, json.Unmarshal([]byte(pod.Annotations[v1beta1.SidecarSetHashAnnotation]), &hashes))
			require.Contains(t, hashes, "sidecarset1")
			assert.Equal(t, ss.Annotations[v1beta1.SidecarSetHashAnnotation], hashes["sidecarset1"].Hash)
			assert.Equal(t, []string{"dns-f", "log-agent"}, hashes["sidecarset1"].SidecarList)
			assert.True(t, testNow.Equal(hashes["sidecarset1"].UpdateTimestamp.Time))
			assert.Contains(t, pod.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation],
				ss.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation])
		},
	}, {
		name: "W1 pod not matched: allowed untouched",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			return podRequest(t, "default", p1(withLabel("doesnt-match")))
		},
		allowed: true, code: 200,
	}, {
		name: "gated pod admitted uninjected, with the gate's reason",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			return podRequest(t, "default", p1(func(p *corev1.Pod) { p.Spec.HostNetwork = true }))
		},
		allowed: true, code: 200, message: "pod uses hostNetwork", warn: "pod uses hostNetwork",
	}, {
		name: "inactive pod (Succeeded) ignored",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			return podRequest(t, "default", p1(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }))
		},
		allowed: true, code: 200,
	}, {
		name: "inactive pod (being deleted) ignored",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			return podRequest(t, "default", p1(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: testNow} }))
		},
		allowed: true, code: 200,
	}, {
		name: "subresource request ignored",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			r := podRequest(t, "default", p1())
			r.SubResource = "ephemeralcontainers"
			return r
		},
		allowed: true, code: 200,
	}, {
		name: "UPDATE ignored",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			r := podRequest(t, "default", p1())
			r.Operation = admissionv1.Update
			r.OldObject = r.Object
			return r
		},
		allowed: true, code: 200,
	}, {
		name: "not a pod (wrong resource) ignored",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			r := podRequest(t, "default", p1())
			r.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
			r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
			return r
		},
		allowed: true, code: 200,
	}, {
		name: "namespace taken from the request when the pod has none",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			return podRequest(t, "shop", p1(withLabel("scoped"), func(p *corev1.Pod) { p.Namespace = "" }))
		},
		allowed: true, code: 200,
		check: func(t *testing.T, pod *corev1.Pod) {
			assert.Equal(t, []string{"agent", "nginx"}, containerNames(pod.Spec.Containers), "BeforeAppContainer by default")
			assert.Empty(t, pod.Namespace, "the patch does not write the namespace")
		},
	}, {
		name: "request namespace outside the SidecarSet's spec.namespace: not matched",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			return podRequest(t, "other", p1(withLabel("scoped"), func(p *corev1.Pod) { p.Namespace = "" }))
		},
		allowed: true, code: 200,
	}, {
		name: "invalid MergePatchJson: denied naming SidecarSet and field",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			return podRequest(t, "default", p1(withLabel("bad-merge"), func(p *corev1.Pod) {
				p.Annotations = map[string]string{"config": "not json"}
			}))
		},
		code: http.StatusForbidden, message: `sidecar injection failed: SidecarSet "bad-merge" spec.patchPodMetadata[0].annotations[config]`,
	}, {
		name: "W12 missing revision: denied",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			return podRequest(t, "default", p1(withLabel("no-revision")))
		},
		code:    http.StatusForbidden,
		message: `SidecarSet "no-revision" spec.injectionStrategy.revision`,
	}, {
		name: "object is not a pod: 400",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			r := podRequest(t, "default", p1())
			r.Object = runtime.RawExtension{Raw: []byte(`{"spec":{"containers":"nginx"}}`)}
			return r
		},
		code: http.StatusBadRequest, message: "decoding the pod",
	}, {
		// The decision would read app=web (gjson: the first key), the injection app=other (the last).
		name: "a key twice: 400, never decided on one value and injected with another",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			r := podRequest(t, "default", p1())
			r.Object = runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"p","labels":{"app":"web"},"labels":{"app":"other"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`)}
			return r
		},
		code: http.StatusBadRequest, message: `decoding the pod: jsontext: duplicate object member name "labels" within "/metadata"`,
	}, {
		name: "no object: 400",
		req: func(t *testing.T) admissionv1.AdmissionRequest {
			r := podRequest(t, "default", p1())
			r.Object = runtime.RawExtension{}
			return r
		},
		code: http.StatusBadRequest, message: "the request has no pod",
	}, {
		name:      "policies not loaded: 503",
		snapshots: &engine.Engine{},
		req:       func(t *testing.T) admissionv1.AdmissionRequest { return podRequest(t, "default", p1()) },
		code:      http.StatusServiceUnavailable, message: "policies not loaded yet",
	}, {
		// config/components/fail-open: failurePolicy Ignore covers an unreachable webhook; a replica
		// that answers before its first compile lets the pod through too.
		name:      "policies not loaded, fail-open: admitted unchanged with a warning",
		snapshots: &engine.Engine{},
		failOpen:  true,
		req:       func(t *testing.T) admissionv1.AdmissionRequest { return podRequest(t, "default", p1()) },
		allowed:   true, code: 200, message: "policies not loaded yet",
		warn: "sidecarops: no sidecars injected: policies not loaded yet (fail-open)",
	}, {
		name:      "no snapshot source at all: 503, no panic",
		snapshots: snapshotsFunc(func() *engine.Snapshot { return nil }),
		req:       func(t *testing.T) admissionv1.AdmissionRequest { return podRequest(t, "default", p1()) },
		code:      http.StatusServiceUnavailable, message: "policies not loaded yet",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snaps := tt.snapshots
			if snaps == nil {
				snaps = eng
			}
			req := tt.req(t)
			resp := admit(t, &PodInjector{Snapshots: snaps, Injector: fixedInjector(), FailOpen: tt.failOpen}, req)
			assert.Equal(t, tt.allowed, resp.Allowed)
			require.NotNil(t, resp.Result)
			assert.Equal(t, tt.code, resp.Result.Code)
			assert.Contains(t, resp.Result.Message, tt.message)
			if tt.warn != "" {
				require.Len(t, resp.Warnings, 1)
				assert.Contains(t, resp.Warnings[0], tt.warn)
			} else {
				assert.Empty(t, resp.Warnings)
			}
			if tt.check == nil {
				assert.Empty(t, resp.Patch)
				assert.Nil(t, resp.PatchType)
				return
			}
			var pod corev1.Pod
			applyPatch(t, resp, req.Object.Raw, &pod)
			tt.check(t, &pod)
		})
	}
}

// W24: two matching SidecarSets are applied in name order and both listed.
func TestPodInjectorTwoSidecarSets(t *testing.T) {
	ss3 := minimalSidecarSet("sidecarset3", "suxing-test", "sidecar3")
	eng := newEngine(t, policyState{sidecarSets: []*v1beta1.SidecarSet{ss3, ss1()}})
	req := podRequest(t, "default", podP1())
	resp := admit(t, &PodInjector{Snapshots: eng, Injector: fixedInjector()}, req)
	require.True(t, resp.Allowed)
	var pod corev1.Pod
	applyPatch(t, resp, req.Object.Raw, &pod)
	assert.Equal(t, "sidecarset1,sidecarset3", pod.Annotations[v1beta1.SidecarSetListAnnotation])
	assert.Equal(t, []string{"dns-f", "sidecar3", "nginx", "log-agent"}, containerNames(pod.Spec.Containers),
		"both Before sidecars in SidecarSet name order")
}

// With reinvocationPolicy IfNeeded the API server may call the webhook again with the injected
// pod; a second injection must leave it as it is.
func TestPodInjectorReinvocation(t *testing.T) {
	h := &PodInjector{Snapshots: podEngine(t), Injector: fixedInjector()}
	req := podRequest(t, "default", podP1())
	var first corev1.Pod
	applyPatch(t, admit(t, h, req), req.Object.Raw, &first)

	again := podRequest(t, "default", &first)
	resp := admit(t, h, again)
	require.True(t, resp.Allowed)
	second := first
	if len(resp.Patch) > 0 {
		second = corev1.Pod{}
		applyPatch(t, resp, again.Object.Raw, &second)
	}
	assert.Equal(t, first, second)
}

// A body that is not an AdmissionReview, or not JSON, gets a clean 400 from every handler.
func TestMalformedBodies(t *testing.T) {
	handlers := map[string]any{
		PodPath:                &PodInjector{Snapshots: podEngine(t)},
		SidecarSetDefaultPath:  &SidecarSetDefaulter{},
		SidecarSetValidatePath: &SidecarSetValidator{Snapshots: podEngine(t)},
	}
	bodies := map[string]string{
		"invalid json":     `invalid json`,
		"empty":            ``,
		"truncated":        `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"`,
		"wrong type":       `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":1}}`,
		"object not json":  `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","object":"invalid json"}}`,
		"no request":       `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
		"null":             `null`,
		"array":            `[]`,
		"other kind":       `{"apiVersion":"v1","kind":"Pod"}`,
		"object is a list": `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","resource":{"version":"v1","resource":"pods"},"kind":{"group":"apps.kruise.io","version":"v1alpha1","kind":"SidecarSet"},"object":[1,2]}}`,
	}
	for path, h := range handlers {
		for name, body := range bodies {
			t.Run(path+"/"+name, func(t *testing.T) {
				resp := post(t, httpHandler(h), []byte(body))
				if resp.Allowed {
					// Requests that decode but name nothing this handler looks at are let through.
					assert.Empty(t, resp.Patch)
					return
				}
				require.NotNil(t, resp.Result)
				assert.GreaterOrEqual(t, resp.Result.Code, int32(400))
				assert.Less(t, resp.Result.Code, int32(500), resp.Result.Message)
			})
		}
	}
}

func TestPodInjectorMetricsAndDecisionLog(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	again, err := NewMetrics(reg)
	require.NoError(t, err, "a second registration reuses the collectors")

	var lines []string
	log := funcr.NewJSON(func(obj string) { lines = append(lines, obj) }, funcr.Options{})
	h := &PodInjector{Snapshots: podEngine(t), Injector: fixedInjector(), Metrics: m, DecisionLog: log}

	unnamed := podP1()
	unnamed.Name, unnamed.GenerateName = "", "web-7d9c8-"
	admit(t, h, podRequest(t, "default", unnamed))
	nomatch := podP1()
	nomatch.Labels["app"] = "none"
	admit(t, h, podRequest(t, "default", nomatch))
	gated := podP1()
	gated.Spec.HostNetwork = true
	admit(t, h, podRequest(t, "default", gated))
	bad := podRequest(t, "default", podP1())
	bad.Object.Raw = []byte(`{"metadata":"x"}`)
	admit(t, h, bad)
	skipped := podRequest(t, "default", podP1())
	skipped.SubResource = "status"
	admit(t, h, skipped)

	for result, want := range map[string]float64{ResultPatched: 1, ResultNotMatched: 1, ResultGated: 1, ResultError: 1} {
		assert.Equal(t, want, testutil.ToFloat64(again.decisions.WithLabelValues(result)), result)
	}
	assert.Equal(t, map[string]uint64{PodPath: 5, SidecarSetDefaultPath: 0, SidecarSetValidatePath: 0}, latencyCounts(t, reg),
		"every admission is timed, skipped ones included; every webhook's series exists from the start")

	require.Len(t, lines, 4, "one line per decision, none for the skipped subresource request")
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	assert.Equal(t, "pod admission", first["msg"])
	assert.Equal(t, "default", first["namespace"])
	assert.Equal(t, "web-7d9c8-", first["pod"])
	assert.Equal(t, ResultPatched, first["result"])
	assert.Equal(t, []any{"sidecarset1"}, first["matched"])
	assert.Equal(t, []any{"sidecarset1"}, first["injected"])
	assert.Equal(t, h.Snapshots.Current().Revision(), first["revision"])
	assert.Contains(t, first, "duration")
	assert.Contains(t, lines[2], "pod uses hostNetwork")
	assert.Contains(t, lines[3], `"error"`)

	// Off: the zero Logger writes nothing and the handler still answers.
	lines = nil
	h.DecisionLog = logr.Logger{}
	admit(t, h, podRequest(t, "default", podP1()))
	assert.Empty(t, lines)
}

// latencyCounts returns the number of observations of the latency histogram by webhook.
func latencyCounts(t *testing.T, reg *prometheus.Registry) map[string]uint64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "sidecarops_webhook_admission_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" {
					out[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

// A ReplicaSet's pods after the first are answered from the handler's cache before they are
// decoded: each answer, and each decision log line, is what a handler without one gives. With the
// cache turned off (--injection-cache=false) the answers are the same and the cache is never
// consulted: it stays as it was made.
func TestPodInjectorBurst(t *testing.T) {
	eng := podEngine(t)
	for _, tc := range []struct {
		name    string
		noCache bool
	}{
		{"cache", false},
		{"no cache", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines []string
			log := funcr.NewJSON(func(obj string) { lines = append(lines, obj) }, funcr.Options{})
			h := &PodInjector{Snapshots: eng, Injector: fixedInjector(), DecisionLog: log, NoInjectionCache: tc.noCache}
			template := podP1()
			template.GenerateName = "web-7d9c8-"
			nomatch := podP1()
			nomatch.Labels["app"] = "none"
			gated := podP1()
			gated.Spec.HostNetwork = true
			// Three of each: the first is seen, the second kept, the third answered from the cache.
			for i, tmpl := range []*corev1.Pod{template, template, template, nomatch, nomatch, nomatch, gated, gated, gated} {
				p := tmpl.DeepCopy()
				p.Name, p.UID = fmt.Sprintf("web-7d9c8-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
				req := podRequest(t, "default", p)
				var fresh []string
				want := admit(t, &PodInjector{Snapshots: eng, Injector: fixedInjector(),
					DecisionLog: funcr.NewJSON(func(obj string) { fresh = append(fresh, obj) }, funcr.Options{})}, req)
				got := admit(t, h, req)
				assert.Equal(t, want, got, "pod %d", i)
				require.Len(t, fresh, 1)
				assert.Equal(t, withoutDuration(t, fresh[0]), withoutDuration(t, lines[len(lines)-1]), "pod %d", i)
			}
			assert.Equal(t, tc.noCache, reflect.ValueOf(&h.cache).Elem().IsZero(), "the cache untouched")
		})
	}
}

// withoutDuration is a decision log line without the one field that differs between two runs.
func withoutDuration(t *testing.T, line string) map[string]any {
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &m))
	delete(m, "duration")
	return m
}
