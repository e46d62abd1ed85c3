package installview

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sidecarops/sidecarops/internal/podwebhook"
	"github.com/sidecarops/sidecarops/internal/testing/render"
)

// root is the repository's root, from this package's directory.
const root = "../../.."

// registeredView is the view of the pod webhook registered in objs, manifests as parsed or rendered.
func registeredView(t *testing.T, objs render.Objects) *podwebhook.View {
	t.Helper()
	u, ok := objs["MutatingWebhookConfiguration/"+podwebhook.ConfigurationName]
	require.True(t, ok, "MutatingWebhookConfiguration %s is there", podwebhook.ConfigurationName)
	var mwc admissionregv1.MutatingWebhookConfiguration
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &mwc))
	v, err := podwebhook.FromConfiguration(&mwc)
	require.NoError(t, err)
	return v
}

// sameView says that sidecarctl's view selects what the registered webhook selects: every field
// the view models (the namespace and object selectors, and the match conditions it cannot evaluate
// offline), and so the exclusions its notice names.
func sameView(t *testing.T, registered *podwebhook.View, v *View) {
	t.Helper()
	assert.Equal(t, registered.Namespaces.String(), v.Namespaces.String(), "namespaceSelector")
	assert.Equal(t, registered.Objects.String(), v.Objects.String(), "objectSelector")
	assert.Equal(t, registered.Unevaluated, v.Unevaluated, "matchConditions")
	assert.Equal(t, registered.Exclusions(), v.Exclusions(), "what the notice says is left out")
}

// TestTheDefaultAsConfigWebhookInstallsIt holds the view assumed without --install-values or
// --kubeconfig to config/webhook's registration.
func TestTheDefaultAsConfigWebhookInstallsIt(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "config/webhook/manifests.yaml"))
	require.NoError(t, err)
	objs, err := render.Parse(raw)
	require.NoError(t, err)
	assumed, err := Default()
	require.NoError(t, err)
	sameView(t, registeredView(t, objs), assumed)
}

// TestInstallValuesAsTheChartRenders holds FromValues, the chart's pod-webhook template restated in
// Go, to `helm template` of the chart: for the chart's own values and for each value that changes
// which pods the pod webhook sees (alone and together, in another release namespace), the selectors
// Helm renders select what sidecarctl makes of the values file. A value the view does not model
// (failurePolicy) must leave it as it is.
func TestInstallValuesAsTheChartRenders(t *testing.T) {
	chart := filepath.Join(root, "charts/sidecarops")
	for _, tc := range []struct {
		name, values, namespace string
	}{
		{"the chart's values", "", podwebhook.DefaultNamespace},
		{"the chart's values in another namespace", "", "ops"},
		{"excluded namespaces", "webhookConfiguration:\n  excludedNamespaces: [monitoring, ops, monitoring]\n", "ops"},
		{"a namespace selector", "webhookConfiguration:\n  namespaceSelector:\n    matchLabels: {mesh: enabled}\n    matchExpressions:\n    - {key: tier, operator: NotIn, values: [batch]}\n", "ops"},
		{"an object selector", "webhookConfiguration:\n  objectSelector:\n    matchLabels: {inject: \"yes\"}\n", podwebhook.DefaultNamespace},
		{"an empty object selector: the chart leaves it out", "webhookConfiguration:\n  objectSelector: {matchLabels: {}}\n", podwebhook.DefaultNamespace},
		{"failurePolicy Ignore: no pod more or less", "webhookConfiguration:\n  failurePolicy: {pods: Ignore}\n  failOpen: true\n", podwebhook.DefaultNamespace},
		{"all of them", `webhookConfiguration:
  excludedNamespaces: [monitoring, ops]
  namespaceSelector:
    matchLabels: {mesh: enabled}
    matchExpressions:
    - {key: tier, operator: NotIn, values: [batch]}
  objectSelector:
    matchExpressions:
    - {key: sidecar, operator: NotIn, values: ["off"]}
`, "ops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := filepath.Join(chart, "values.yaml")
			if tc.values != "" {
				values = filepath.Join(t.TempDir(), "values.yaml")
				require.NoError(t, os.WriteFile(values, []byte(tc.values), 0o600))
			}
			objs, err := render.Chart(t.TempDir(), chart, "sidecarops", tc.namespace, []string{values})
			require.NoError(t, err)
			read, err := FromValues(values, tc.namespace)
			require.NoError(t, err)
			sameView(t, registeredView(t, objs), read)
		})
	}
}
