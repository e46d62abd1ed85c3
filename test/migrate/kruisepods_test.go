package migrate

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/internal/coexist"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/mutation"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// protectedLabel marks the pods the stand-in's PodUnavailableBudget protects.
const protectedLabel = "pub.example.com/protected"

// kruisePodWebhooks stands in for OpenKruise's pod webhooks as path B keeps them (docs/decisions.md
// D10), which cannot run here (OpenKruise's module is not served by the Go module proxy):
//   - mpod.kb.io, on pod creation: OpenKruise's SidecarSet injection, with the SidecarSets and
//     revisions the API server holds, which is byte-identical to sidecarops' own (the parity suite
//     holds the two to it), then container launch priority for a pod annotated Ordered as its
//     webhook writes it (reference §8.2: container i gets priority -i and the barrier env naming key
//     p_<priority> of ConfigMap <pod>-barrier);
//   - vpod.kb.io, on pod deletion: a PodUnavailableBudget with maxUnavailable 0 over the pods
//     labelled protectedLabel, refusing their deletion.
//
// It registers them under OpenKruise's configuration names with the SidecarSet webhooks beside them
// and the template annotation OpenKruise's webhook controller rebuilds them from.
func kruisePodWebhooks(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/mutate-pod", reviewHandler(t, func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		pod := &corev1.Pod{}
		if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: err.Error()}}
		}
		out, err := openKruiseInjects(context.Background(), pod, req.Namespace)
		if err != nil {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: err.Error(), Code: http.StatusInternalServerError}}
		}
		after, err := json.Marshal(out)
		if err != nil {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: err.Error()}}
		}
		patch, err := jsonpatch.CreatePatch(req.Object.Raw, after)
		if err != nil {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: err.Error()}}
		}
		resp := &admissionv1.AdmissionResponse{Allowed: true}
		if len(patch) > 0 {
			raw, _ := json.Marshal(patch)
			resp.Patch, resp.PatchType = raw, ptr.To(admissionv1.PatchTypeJSONPatch)
		}
		return resp
	}))
	mux.HandleFunc("/validate-pod", reviewHandler(t, func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		pod := &corev1.Pod{}
		if err := json.Unmarshal(req.OldObject.Raw, pod); err == nil && pod.Labels[protectedLabel] == "true" {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: http.StatusForbidden,
				Message: "pod deletion refused: PodUnavailableBudget protected allows no unavailable pod"}}
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	}))
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cc := func(path string) admissionregv1.WebhookClientConfig {
		return admissionregv1.WebhookClientConfig{URL: ptr.To(srv.URL + path), CABundle: ca}
	}
	// OpenKruise's own namespaces (labelled control-plane) are not sent to it, as its chart registers it.
	notItsOwn := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "control-plane", Operator: metav1.LabelSelectorOpDoesNotExist}}}
	nothing := &metav1.LabelSelector{MatchLabels: map[string]string{"selects": "nothing"}}
	rule := func(group, resource string, ops ...admissionregv1.OperationType) []admissionregv1.RuleWithOperations {
		return []admissionregv1.RuleWithOperations{{Operations: ops,
			Rule: admissionregv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}}}}
	}
	none := ptr.To(admissionregv1.SideEffectClassNone)
	m := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: coexist.MutatingConfiguration}, Webhooks: []admissionregv1.MutatingWebhook{
		{Name: "mpod.kb.io", ClientConfig: cc("/mutate-pod"), Rules: rule("", "pods", admissionregv1.Create), NamespaceSelector: notItsOwn,
			FailurePolicy: ptr.To(admissionregv1.Fail), SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
		{Name: "msidecarset.kb.io", ClientConfig: cc("/mutate-sidecarset"), Rules: rule("apps.kruise.io", "sidecarsets", admissionregv1.Create, admissionregv1.Update),
			ObjectSelector: nothing, FailurePolicy: ptr.To(admissionregv1.Ignore), SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
	}}
	v := &admissionregv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: coexist.ValidatingConfiguration}, Webhooks: []admissionregv1.ValidatingWebhook{
		{Name: "vpod.kb.io", ClientConfig: cc("/validate-pod"), Rules: rule("", "pods", admissionregv1.Delete), NamespaceSelector: notItsOwn,
			FailurePolicy: ptr.To(admissionregv1.Fail), SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
		{Name: "vsidecarset.kb.io", ClientConfig: cc("/validate-sidecarset"), Rules: rule("apps.kruise.io", "sidecarsets", admissionregv1.Create, admissionregv1.Update),
			ObjectSelector: nothing, FailurePolicy: ptr.To(admissionregv1.Ignore), SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
	}}
	template := func(hooks any) map[string]string {
		raw, err := json.Marshal(hooks)
		require.NoError(t, err)
		return map[string]string{coexist.TemplateAnnotation: string(raw)}
	}
	m.Annotations, v.Annotations = template(m.Webhooks), template(v.Webhooks)
	for _, o := range []client.Object{m, v} {
		require.NoError(t, cluster.Client.Create(ctx(t), o))
		t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), o) })
	}
}

// openKruiseInjects is what OpenKruise's pod webhook makes of pod: its SidecarSet injection, then
// container launch priority.
func openKruiseInjects(ctx context.Context, pod *corev1.Pod, ns string) (*corev1.Pod, error) {
	var sets v1beta1.SidecarSetList
	if err := cluster.Client.List(ctx, &sets); err != nil {
		return nil, err
	}
	var revs appsv1.ControllerRevisionList
	if err := cluster.Client.List(ctx, &revs, client.InNamespace(kruiseNS)); err != nil {
		return nil, err
	}
	var namespaces corev1.NamespaceList
	if err := cluster.Client.List(ctx, &namespaces); err != nil {
		return nil, err
	}
	state := bundles.State{}
	for i := range sets.Items {
		ss := &sets.Items[i]
		if err := defaults.SidecarSetAndHash(ss); err != nil {
			return nil, err
		}
		state.SidecarSets = append(state.SidecarSets, ss)
	}
	for i := range revs.Items {
		state.ControllerRevisions = append(state.ControllerRevisions, &revs.Items[i])
	}
	for i := range namespaces.Items {
		state.Namespaces = append(state.Namespaces, &namespaces.Items[i])
	}
	snap, err := injector.Snapshot(ctx, injector.Policies{State: state})
	if err != nil {
		return nil, err
	}
	res, err := injector.Pod(ctx, snap, &mutation.Injector{Now: time.Now, Rand: rand.Float64}, injector.PodRequest{Pod: pod, Namespace: ns})
	if err != nil {
		return nil, err
	}
	out := res.Pod.DeepCopy()
	if out.Annotations["apps.kruise.io/container-launch-priority"] == "Ordered" {
		if out.Name == "" {
			// The barrier is named after the pod, so the webhook names a generateName'd pod first.
			out.Name = out.GenerateName + fmt.Sprintf("%05d", rand.IntN(100000))
		}
		for i := range out.Spec.Containers {
			out.Spec.Containers[i].Env = append(out.Spec.Containers[i].Env, corev1.EnvVar{
				Name: "KRUISE_CONTAINER_BARRIER",
				ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: out.Name + "-barrier"},
					Key:                  fmt.Sprintf("p_%d", -i),
				}},
			})
		}
	}
	return out, nil
}

// reviewHandler serves AdmissionReviews with answer.
func reviewHandler(t *testing.T, answer func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		resp := answer(review.Request)
		resp.UID = review.Request.UID
		review.Response, review.Request = resp, nil
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(review); err != nil {
			t.Errorf("answering a review: %v", err)
		}
	}
}
