package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/open-policy-agent/opa/v1/bundle"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// FuzzAdmissionReview posts arbitrary bytes as the HTTP body to each of the three webhooks, mounted
// as controller-runtime mounts them but with panics not recovered. Whatever the body, each must
// answer 200 with a JSON AdmissionReview carrying a response; a denial must carry a 4xx/5xx code;
// and a patch must apply to the object of the request it answers.
func FuzzAdmissionReview(f *testing.F) {
	badMerge := minimalSidecarSet("bad-merge", "bad-merge", "agent")
	badMerge.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{
		Annotations: map[string]string{"config": `{"a":1}`}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy,
	}}
	eng := newEngine(f, policyState{
		sidecarSets: []*v1beta1.SidecarSet{ss1(), v21("sidecarset-v21"), badMerge},
		admin:       []*bundle.Bundle{gatesBundle(f, hostNetworkGate), whitelistBundle(`^allowed\.example\.com/`)},
	})
	hooks := map[string]http.Handler{
		PodPath:                httpHandler(&PodInjector{Snapshots: eng, Injector: fixedInjector()}),
		SidecarSetDefaultPath:  httpHandler(&SidecarSetDefaulter{}),
		SidecarSetValidatePath: httpHandler(&SidecarSetValidator{Snapshots: eng}),
	}
	paths := make([]string, 0, len(hooks))
	for p := range hooks {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	gated := podP1()
	gated.Spec.HostNetwork = true
	merge := podP1()
	merge.Labels["app"] = "bad-merge"
	merge.Annotations = map[string]string{"config": `{"b":2}`}
	conflicting := v21("sidecarset2")
	conflicting.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"x.example.com/a": "1"}}}
	for _, req := range []admissionv1.AdmissionRequest{
		podRequest(f, "default", podP1()),
		podRequest(f, "", gated),
		podRequest(f, "default", merge),
		sidecarSetRequest(f, admissionv1.Create, ss1(), nil),
		sidecarSetRequest(f, admissionv1.Create, conflicting, nil),
		sidecarSetRequest(f, admissionv1.Update, v21("sidecarset-v21"), v21("sidecarset-v21")),
		sidecarSetRequest(f, admissionv1.Delete, nil, ss1()),
	} {
		f.Add(review(f, req))
	}
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apps.kruise.io","version":"v1alpha1","kind":"SidecarSet"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":` + m1 + `}}`))
	// A matching pod whose JSON has no spec: the patch must still apply (it needs an "add /spec").
	noSpec := podRequest(f, "default", podP1())
	var doc map[string]any
	if err := json.Unmarshal(noSpec.Object.Raw, &doc); err != nil {
		f.Fatal(err)
	}
	delete(doc, "spec")
	noSpec.Object.Raw = mustJSON(f, doc)
	f.Add(review(f, noSpec))
	f.Add([]byte(`invalid json`))
	f.Add([]byte(``))

	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range paths {
			checkAnswer(t, p, hooks[p], body)
		}
	})
}

func checkAnswer(t *testing.T, path string, h http.Handler, body []byte) {
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("%s: HTTP %d", path, w.Code)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s: response is not JSON: %v\n%s", path, err, w.Body.Bytes())
	}
	resp := out.Response
	if resp == nil {
		t.Fatalf("%s: AdmissionReview without a response: %s", path, w.Body.Bytes())
	}
	if !resp.Allowed && (resp.Result == nil || resp.Result.Code < 400) {
		t.Fatalf("%s: denial without an error code: %s", path, w.Body.Bytes())
	}
	if len(resp.Patch) == 0 {
		return
	}
	if !resp.Allowed {
		t.Fatalf("%s: a denial carries a patch: %s", path, w.Body.Bytes())
	}
	// The request as controller-runtime decoded it (its decoder is case-sensitive, as this one).
	var in admissionv1.AdmissionReview
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &in); err != nil || in.Request == nil {
		t.Fatalf("%s: answered with a patch a body that does not decode: %v", path, err)
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatalf("%s: patch does not decode: %v\n%s", path, err, resp.Patch)
	}
	patched, err := patch.Apply(in.Request.Object.Raw)
	if err != nil {
		t.Fatalf("%s: patch does not apply to the request's object: %v\npatch: %s\nobject: %s", path, err, resp.Patch, in.Request.Object.Raw)
	}
	if path == PodPath {
		var pod corev1.Pod
		if err := json.Unmarshal(patched, &pod); err != nil {
			t.Fatalf("patched pod does not decode: %v\n%s", err, patched)
		}
	}
}
