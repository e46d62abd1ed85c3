package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Both versions are served, v1beta1 stored, and the manager converts between them as OpenKruise
// does: a SidecarSet written as v1alpha1 is read back as v1beta1 with its spec.namespace become a
// namespaceSelector and its custom-version label become spec.customVersion, and injects into the
// pods of that namespace only; one written as v1beta1 reads back as v1alpha1. Read as v1alpha1
// again, each is as written.
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
	// Stored as v1beta1 and answered as v1alpha1 again as written: spec.namespace comes back from the
	// annotation the stored object keeps it in.
	assert.Equal(t, "e2e-alpha", alpha.Spec.Namespace)
	assert.Nil(t, alpha.Spec.NamespaceSelector)
	assert.NotContains(t, alpha.Annotations, v1alpha1.V1alpha1FieldsAnnotation)
	assert.Equal(t, "v7", alpha.Labels[v1alpha1.SidecarSetCustomVersionLabel])
	assert.NotEmpty(t, alpha.Annotations[v1beta1.SidecarSetHashAnnotation], "defaulted and hashed")

	var beta v1beta1.SidecarSet
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: "e2e-alpha"}, &beta))
	assert.Equal(t, v1beta1.NamespaceNamed("e2e-alpha"), beta.Spec.NamespaceSelector)
	assert.Equal(t, "v7", beta.Spec.CustomVersion)
	assert.NotContains(t, beta.Labels, v1alpha1.SidecarSetCustomVersionLabel)
	assert.JSONEq(t, `{"namespace":"e2e-alpha"}`, beta.Annotations[v1alpha1.V1alpha1FieldsAnnotation])

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

// Issue 28: a v1alpha1 client that reads a SidecarSet stored as v1beta1 and replaces it, changing
// one annotation, changes nothing else. What v1alpha1 has no place for (the v1beta1 object's own
// custom-version label) rides in an annotation and comes back as it was: same spec, same labels,
// generation still 1.
func TestAlphaReplaceKeepsTheBetaObject(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1beta1.SidecarSet)
	}{
		{
			name: "the custom-version label and no spec.customVersion",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Labels = map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v1", "team": "a"}
			},
		},
		{
			name: "the custom-version label and another spec.customVersion",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Labels = map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v1"}
				ss.Spec.CustomVersion = "v2"
			},
		},
		{
			name: "an empty custom-version label",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Labels = map[string]string{v1alpha1.SidecarSetCustomVersionLabel: ""}
			},
		},
		{
			name:   "a namespaceSelector on the name label",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed("e2e-replace") },
		},
		{
			name: "a namespaceSelector on the name label and another term",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{v1beta1.NamespaceNameLabel: "e2e-replace", "env": "prod"}}
			},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("e2e-replace-%d", i)
			created := sidecarSet(name, map[string]string{"app": name}, name, tt.mutate)
			require.NoError(t, cluster.Client.Create(ctx(t), created))
			t.Cleanup(func() { _ = cluster.Client.Delete(ctx(t), created) })

			require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var alpha v1alpha1.SidecarSet
				if err := cluster.Client.Get(ctx(t), client.ObjectKey{Name: name}, &alpha); err != nil {
					return err
				}
				if alpha.Annotations == nil {
					alpha.Annotations = map[string]string{}
				}
				alpha.Annotations["e2e.example.com/touched"] = "yes"
				return cluster.Client.Update(ctx(t), &alpha)
			}))

			var stored v1beta1.SidecarSet
			require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: name}, &stored))
			assert.Equal(t, "yes", stored.Annotations["e2e.example.com/touched"])
			assert.True(t, apiequality.Semantic.DeepEqual(created.Spec, stored.Spec), "the spec changed: %s", diff.Diff(created.Spec, stored.Spec))
			assert.Equal(t, created.Labels, stored.Labels)
			assert.Equal(t, int64(1), stored.Generation)
			assert.NotContains(t, stored.Annotations, v1alpha1.V1beta1FieldsAnnotation)
		})
	}
}
