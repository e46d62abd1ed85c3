package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/testing/readonly"
	"github.com/sidecarops/sidecarops/internal/testing/testfiles"
	"github.com/sidecarops/sidecarops/mutation"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/test/bench/perfinputs"
)

func TestMain(m *testing.M) {
	// admission.Webhook logs through controller-runtime's global logger, which complains on stderr
	// (in the middle of benchmark output) when none was ever set.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	perfinputs.Cleanup() // what BenchmarkPodInjectorPerPod generated
	os.Exit(code)
}

// Fixtures restate compat §4 "P1" and "SS1"; every test builds its own copy.

var testNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func fixedInjector() *mutation.Injector {
	return &mutation.Injector{Now: func() time.Time { return testNow }, Rand: func() float64 { return 0.5 }}
}

func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// podP1 is compat §4 "P1".
func podP1() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "test-pod", Namespace: "default",
			Labels: map[string]string{"app": "suxing-test"},
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init-0", Image: "busybox:1.0.0"}},
			Containers: []corev1.Container{{
				Name: "nginx", Image: "nginx:1.15.1",
				Env: []corev1.EnvVar{env("hello1", "world1"), env("hello2", "world2")},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "volume-a", MountPath: "/a/b"}, {Name: "volume-b", MountPath: "/e/f"},
				},
			}},
			Volumes: []corev1.Volume{emptyDir("volume-a"), emptyDir("volume-b")},
		},
	}
}

func sidecar(name, image string, policy v1beta1.PodInjectPolicyType) v1beta1.SidecarContainer {
	return v1beta1.SidecarContainer{Container: corev1.Container{Name: name, Image: image}, PodInjectPolicy: policy}
}

// ss1 is compat §4 "SS1", not yet defaulted.
func ss1() *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: "SidecarSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "sidecarset1"},
		Spec: v1beta1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "suxing-test"}},
			InitContainers: []v1beta1.SidecarContainer{
				sidecar("init-2", "busybox:1.0.0", ""), sidecar("init-1", "busybox:1.0.0", ""),
			},
			Containers: []v1beta1.SidecarContainer{
				sidecar("dns-f", "dns-f-image:1.0", v1beta1.BeforeAppContainerType),
				sidecar("log-agent", "log-agent-image:1.0", v1beta1.AfterAppContainerType),
			},
		},
	}
}

// minimalSidecarSet is a valid SidecarSet selecting app=<app> with one container.
func minimalSidecarSet(name, app, container string) *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: "SidecarSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Containers: []v1beta1.SidecarContainer{sidecar(container, "example.com/"+container+":1.0", "")},
		},
	}
}

// policyState is what a test snapshot is compiled from.
type policyState struct {
	sidecarSets []*v1beta1.SidecarSet
	revisions   []*appsv1.ControllerRevision
	admin       []*bundle.Bundle
}

// newEngine builds a snapshot the way cmd/sidecarctl does (defaulted and hashed SidecarSets,
// engine.Compiler) and installs it in an Engine.
func newEngine(tb testing.TB, st policyState) *engine.Engine {
	tb.Helper()
	for _, ss := range st.sidecarSets {
		require.NoError(tb, defaults.SidecarSetAndHash(ss))
	}
	readonly.Guard(tb, st.sidecarSets...)
	readonly.Guard(tb, st.revisions...)
	snap, err := new(engine.Compiler).Snapshot(context.Background(), bundles.State{SidecarSets: st.sidecarSets, ControllerRevisions: st.revisions}, st.admin)
	require.NoError(tb, err)
	var e engine.Engine
	e.Swap(snap)
	return &e
}

// whitelistBundle is an administrators' whitelist: data under root "whitelist", as sidecarctl
// builds it from OpenKruise's ConfigMap.
func whitelistBundle(keyExprs ...string) *bundle.Bundle {
	exprs := make([]any, len(keyExprs))
	for i, e := range keyExprs {
		exprs[i] = e
	}
	return &bundle.Bundle{
		Manifest: bundle.Manifest{Revision: "whitelist-1", Roots: &[]string{"whitelist"}},
		Data: map[string]any{"whitelist": map[string]any{
			"rules": []any{map[string]any{"allowedAnnotationKeyExprs": exprs}},
		}},
	}
}

// gatesBundle reads an administrators' gate bundle from files, as the manager would.
func gatesBundle(tb testing.TB, rego string) *bundle.Bundle {
	tb.Helper()
	dir := tb.TempDir()
	testfiles.Write(tb, dir, map[string]string{
		".manifest":        `{"revision":"gates-1","roots":["gates"]}`,
		"gates/gates.rego": rego,
	})
	b, err := bundles.Read(dir, nil)
	require.NoError(tb, err)
	return b
}

const hostNetworkGate = `package gates

deny_injection contains "pod uses hostNetwork" if input.pod.spec.hostNetwork == true
`

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	raw, err := json.Marshal(v)
	require.NoError(tb, err)
	return raw
}

var (
	podGVK        = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	podGVR        = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	sidecarSetGVK = metav1.GroupVersionKind{Group: "apps.kruise.io", Version: "v1beta1", Kind: "SidecarSet"}
	sidecarSetGVR = metav1.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "sidecarsets"}
)

// podRequest is the API server's request for the creation of pod in namespace ns.
func podRequest(tb testing.TB, ns string, pod *corev1.Pod) admissionv1.AdmissionRequest {
	return admissionv1.AdmissionRequest{
		UID: types.UID("uid-" + ns), Kind: podGVK, Resource: podGVR, RequestKind: &podGVK, RequestResource: &podGVR,
		Name: pod.Name, Namespace: ns, Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: mustJSON(tb, pod)},
	}
}

// sidecarSetRequest is the API server's request for op on ss (old only on UPDATE).
func sidecarSetRequest(tb testing.TB, op admissionv1.Operation, ss, old *v1beta1.SidecarSet) admissionv1.AdmissionRequest {
	req := admissionv1.AdmissionRequest{
		UID: "uid-ss", Kind: sidecarSetGVK, Resource: sidecarSetGVR, RequestKind: &sidecarSetGVK, RequestResource: &sidecarSetGVR,
		Operation: op,
	}
	if ss != nil {
		req.Name = ss.Name
		req.Object.Raw = mustJSON(tb, ss)
	}
	if old != nil {
		req.OldObject.Raw = mustJSON(tb, old)
	}
	return req
}

// review wraps a request in an AdmissionReview as the API server sends it.
func review(tb testing.TB, req admissionv1.AdmissionRequest) []byte {
	return mustJSON(tb, admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req,
	})
}

// httpHandler mounts h as Register would, except that a panic is not recovered: tests must see it,
// not a 500 response. h is a *PodInjector (an http.Handler of its own) or an admission.Handler
// (wrapped in controller-runtime's admission.Webhook).
func httpHandler(h any) http.Handler {
	switch h := h.(type) {
	case *PodInjector:
		h.panics = true
		return h
	case admission.Handler:
		return (&admission.Webhook{Handler: h}).WithRecoverPanic(false)
	}
	panic(fmt.Sprintf("httpHandler: %T is not a handler", h))
}

// post sends body through the HTTP handler and returns the decoded AdmissionReview response.
func post(tb testing.TB, h http.Handler, body []byte) *admissionv1.AdmissionResponse {
	tb.Helper()
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(tb, http.StatusOK, w.Code, "controller-runtime answers every review with 200")
	var out admissionv1.AdmissionReview
	require.NoError(tb, json.Unmarshal(w.Body.Bytes(), &out), "response: %s", w.Body.String())
	require.NotNil(tb, out.Response, "response: %s", w.Body.String())
	return out.Response
}

// admit posts an AdmissionReview of req to h.
func admit(tb testing.TB, h any, req admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	tb.Helper()
	resp := post(tb, httpHandler(h), review(tb, req))
	require.Equal(tb, req.UID, resp.UID)
	return resp
}

// applyPatch applies the response's JSON patch to the original object and decodes the result.
func applyPatch(tb testing.TB, resp *admissionv1.AdmissionResponse, original []byte, into any) {
	tb.Helper()
	require.NotNil(tb, resp.PatchType)
	require.Equal(tb, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	require.NoError(tb, err)
	out, err := patch.Apply(original)
	require.NoError(tb, err, "patch: %s", resp.Patch)
	require.NoError(tb, json.Unmarshal(out, into))
}

func containerNames(cs []corev1.Container) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// snapshotsFunc adapts a function to Snapshots.
type snapshotsFunc func() *engine.Snapshot

func (f snapshotsFunc) Current() *engine.Snapshot { return f() }
