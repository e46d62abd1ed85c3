package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Both versions are served, v1beta1 stored, and the manager converts between them as OpenKruise
// does: a SidecarSet written as v1alpha1 is read back as v1beta1 with its spec.namespace become a
// namespaceSelector and its custom-version label become spec.customVersion, and injects into the
// pods of that namespace only; one written as v1beta1 reads back as v1alpha1.
func TestBothVersionsServedAndConverted(t *testing.T) {
	namespace(t, "e2e-alpha", nil)
	namespace(t, "e2e-alpha-other", nil)
	alpha := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-alpha", Labels: map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v7"}},
		Spec: v1alpha1.SidecarSetSpec{
			Namespace:  "e2e-alpha",
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "alpha"}},
			Containers: sidecarSet("x", nil, "alpha-agent").Spec.Containers,
		},
	}
	require.NoError(t, cluster.Client.Create(ctx(t), alpha))
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx(t), alpha) })
	// Stored as v1beta1 and answered as v1alpha1 again, as OpenKruise does: spec.namespace comes back
	// as the namespaceSelector it became.
	assert.Empty(t, alpha.Spec.Namespace)
	assert.Equal(t, v1beta1.NamespaceNamed("e2e-alpha"), alpha.Spec.NamespaceSelector)
	assert.Equal(t, "v7", alpha.Labels[v1alpha1.SidecarSetCustomVersionLabel])
	assert.NotEmpty(t, alpha.Annotations[v1beta1.SidecarSetHashAnnotation], "defaulted and hashed")

	var beta v1beta1.SidecarSet
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: "e2e-alpha"}, &beta))
	assert.Equal(t, v1beta1.NamespaceNamed("e2e-alpha"), beta.Spec.NamespaceSelector)
	assert.Equal(t, "v7", beta.Spec.CustomVersion)
	assert.NotContains(t, beta.Labels, v1alpha1.SidecarSetCustomVersionLabel)

	waitInjected(t, pod("e2e-alpha", "in-scope", map[string]string{"app": "alpha"}), "alpha-agent")
	p := pod("e2e-alpha-other", "out-of-scope", map[string]string{"app": "alpha"})
	require.NoError(t, cluster.Client.Create(ctx(t), p))
	assert.Equal(t, []string{"app"}, containerNames(p), "another namespace")

	betaSet := sidecarSet("e2e-beta", map[string]string{"app": "beta"}, "beta-agent", func(ss *v1beta1.SidecarSet) { ss.Spec.CustomVersion = "v1" })
	require.NoError(t, cluster.Client.Create(ctx(t), betaSet))
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx(t), betaSet) })
	var asAlpha v1alpha1.SidecarSet
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: "e2e-beta"}, &asAlpha))
	assert.Equal(t, "v1", asAlpha.Labels[v1alpha1.SidecarSetCustomVersionLabel])
	assert.Empty(t, asAlpha.Spec.Namespace)

	// kubectl applies either version as written (server-side dry run: the admission chain and the
	// conversion, nothing stored).
	for _, doc := range []string{
		"apiVersion: apps.kruise.io/v1alpha1\nkind: SidecarSet\nmetadata: {name: e2e-apply-alpha}\nspec:\n  namespace: e2e-alpha\n  selector: {matchLabels: {app: apply}}\n  containers: [{name: apply-alpha, image: a:1}]\n",
		"apiVersion: apps.kruise.io/v1beta1\nkind: SidecarSet\nmetadata: {name: e2e-apply-beta}\nspec:\n  customVersion: v1\n  selector: {matchLabels: {app: apply}}\n  containers: [{name: apply-beta, image: b:1}]\n",
	} {
		cmd := exec.Command("kubectl", "--kubeconfig", cluster.Kubeconfig, "apply", "--dry-run=server", "-f", "-")
		cmd.Stdin = strings.NewReader(doc)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "(server dry run)")
	}

	// kubectl lists them in either version, with the same columns.
	for _, resource := range []string{"sidecarsets.v1alpha1.apps.kruise.io", "sidecarsets.v1beta1.apps.kruise.io"} {
		out, err := exec.Command("kubectl", "--kubeconfig", cluster.Kubeconfig, "get", resource, "e2e-alpha", "e2e-beta").CombinedOutput()
		require.NoError(t, err, "%s", out)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Len(t, lines, 3, "%s", out)
		assert.Equal(t, []string{"NAME", "MATCHED", "UPDATED", "READY", "UPDATED-READY", "AGE"}, strings.Fields(lines[0]), resource)
	}
}
