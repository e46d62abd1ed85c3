package podwebhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestExcluded: which namespaces and pods each selector leaves out, and why, as the API server
// evaluates them (every Namespace has its name label).
func TestExcluded(t *testing.T) {
	chart, err := New(NamespaceSelector("ops", []string{"monitoring", "ops"}, &metav1.LabelSelector{MatchLabels: map[string]string{"mesh": "on"}}),
		&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "sidecar", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"off"}}}}, nil)
	require.NoError(t, err)
	kustomize, err := New(NamespaceSelector("", nil, nil), nil, nil)
	require.NoError(t, err)
	mesh := map[string]string{"mesh": "on"}
	for _, tc := range []struct {
		name      string
		view      *View
		ns        string
		nsLabels  map[string]string
		podLabels map[string]string
		why       string
	}{
		{"seen", chart, "shop", mesh, nil, ""},
		{"kube-system is seen", kustomize, "kube-system", nil, nil, ""},
		{"the release's namespace", chart, "ops", mesh, nil, "namespace ops is excluded"},
		{"an excluded one", chart, "monitoring", mesh, nil, "namespace monitoring is excluded"},
		{"the manager's, by its label", kustomize, "sidecarops-system", map[string]string{ControlPlaneLabel: ""}, nil, "namespace sidecarops-system is labelled sidecarops.io/control-plane, the manager's own"},
		{"a control plane's, as OpenKruise leaves out", kustomize, "ingress", map[string]string{"control-plane": "x"}, nil, "namespace ingress is labelled control-plane, a control plane's"},
		{"outside the administrator's selector", chart, "shop", nil, nil, "namespace shop does not match its namespaceSelector (mesh=on)"},
		{"a pod outside the object selector", chart, "shop", mesh, map[string]string{"sidecar": "off"}, "the pod does not match its objectSelector (sidecar notin (off))"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.view.NamespaceExcluded(tc.ns, tc.nsLabels)
			if e == nil {
				e = tc.view.ObjectExcluded(tc.podLabels)
			}
			why := ""
			if e != nil {
				why = e.Why(tc.ns)
			}
			assert.Equal(t, tc.why, why)
		})
	}
}

func TestFromConfiguration(t *testing.T) {
	cfg := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "sidecarops"}, Webhooks: []admissionregv1.MutatingWebhook{
		{Name: "msidecarset.sidecarops.io"},
		{Name: WebhookName, MatchConditions: []admissionregv1.MatchCondition{{Name: ConditionName, Expression: "true"}, {Name: "batch", Expression: "false"}}},
	}}
	v, err := FromConfiguration(cfg)
	require.NoError(t, err)
	assert.True(t, v.Namespaces.Empty(), "no selector: every namespace")
	assert.Equal(t, []admissionregv1.MatchCondition{{Name: "batch", Expression: "false"}}, v.Unevaluated, "the prefilter's condition follows the SidecarSets")

	cfg.Webhooks = cfg.Webhooks[:1]
	_, err = FromConfiguration(cfg)
	assert.EqualError(t, err, "MutatingWebhookConfiguration sidecarops has no webhook mpod.sidecarops.io")
}
