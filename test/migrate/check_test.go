package migrate

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/internal/testing/render"
)

// TestMigrateCheckLeavesNothingBehind runs migrate check as a user bound to config/rbac/migrate-check's
// ClusterRole alone, on what OpenKruise leaves behind besides its objects: its patchPodMetadata
// whitelist in its own namespace, pods it injected in a namespace sidecarops' pod webhook does not
// see, and a pod started in order by its pod webhook. The user is refused nothing (its report is the
// cluster administrator's), the report says each with its fix, and the fixes, run as written, clear
// them.
func TestMigrateCheckLeavesNothingBehind(t *testing.T) {
	c := cluster.Client
	const user = "migrate-checker"
	objs, err := render.Kustomize("../../config/rbac/migrate-check")
	require.NoError(t, err)
	role, ok := objs["ClusterRole/sidecarops-migrate-check"]
	require.True(t, ok, "config/rbac/migrate-check has the ClusterRole sidecarops-migrate-check")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "sidecarops-migrate-check"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.GetName()},
	}
	const edge, shop = "check-edge", "check-shop"
	whitelist := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: kruiseNS, Name: v1beta1.KruiseConfigurationName},
		Data:       map[string]string{v1beta1.PatchPodMetadataWhiteListKey: `{"rules":[{"allowedAnnotationKeyExprs":["^logs\\.example\\.com/"]}]}`},
	}
	copied := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: devcluster.Namespace, Name: v1beta1.KruiseConfigurationName}}
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "logs"},
		Spec: v1beta1.SidecarSetSpec{
			Selector:         &metav1.LabelSelector{MatchLabels: map[string]string{"app": "edge"}},
			Containers:       []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "logs", Image: "example.com/logs:1"}}},
			PatchPodMetadata: []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"logs.example.com/format": "json"}}},
		},
	}
	// As OpenKruise's webhook left them: the hash annotation of the SidecarSet, and one pod whose
	// containers start in order.
	injected := func(ns, name string, annotations map[string]string) *corev1.Pod {
		a := map[string]string{v1beta1.SidecarSetHashAnnotation: `{"logs":{"hash":"h","sidecarSetName":"logs"}}`}
		for k, v := range annotations {
			a[k] = v
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "edge"}, Annotations: a},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}, {Name: "logs", Image: "example.com/logs:1"}}},
		}
	}
	pods := []*corev1.Pod{
		injected(edge, "edge-0", nil), injected(edge, "edge-1", nil),
		injected(shop, "ordered", map[string]string{"apps.kruise.io/container-launch-priority": "Ordered"}),
	}
	namespaces := []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: edge, Labels: map[string]string{"control-plane": "edge"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: shop}},
		{ObjectMeta: metav1.ObjectMeta{Name: kruiseNS}},
	}
	for _, ns := range namespaces {
		if err := c.Create(ctx(t), ns); !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	// One of OpenKruise's kinds, which the role must let the check count.
	probes := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"group": "apps.kruise.io", "scope": "Namespaced",
		"names":    map[string]any{"kind": "PodProbeMarker", "listKind": "PodProbeMarkerList", "plural": "podprobemarkers", "singular": "podprobemarker"},
		"versions": []any{map[string]any{"name": "v1alpha1", "served": true, "storage": true, "schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
	}}}
	probes.SetAPIVersion("apiextensions.k8s.io/v1")
	probes.SetKind("CustomResourceDefinition")
	probes.SetName("podprobemarkers.apps.kruise.io")
	require.NoError(t, c.Create(ctx(t), probes))
	t.Cleanup(func() { _ = c.Delete(context.Background(), probes) })
	marker := &unstructured.Unstructured{}
	marker.SetAPIVersion("apps.kruise.io/v1alpha1")
	marker.SetKind("PodProbeMarker")
	marker.SetNamespace(shop)
	marker.SetName("ready")
	eventually(t, "the PodProbeMarker kind is served", func() error { return c.Create(ctx(t), marker.DeepCopy()) })
	created := []client.Object{role, binding, whitelist, ss}
	for _, p := range pods {
		created = append(created, p)
	}
	for _, o := range created {
		require.NoError(t, c.Create(ctx(t), o))
	}
	t.Cleanup(func() {
		// Namespaces are never removed without a namespace controller: what is in them goes.
		for _, o := range append(created, copied, marker) {
			_ = c.Delete(context.Background(), o, client.GracePeriodSeconds(0))
		}
	})

	ctl, err := devcluster.Build("../..", "sidecarctl", t.TempDir())
	require.NoError(t, err)
	asChecker := impersonatingKubeconfig(t, user)
	out, code := migrateCheck(t, ctl, asChecker)
	t.Logf("migrate check as %s:\n%s", user, out)
	assert.NotContains(t, strings.ToLower(out), "forbidden")
	assert.Equal(t, 1, code, "blocked by the whitelist")
	admin, _ := migrateCheck(t, ctl, cluster.Kubeconfig)
	assert.Equal(t, admin, out, "the ClusterRole reads all the administrator reads")

	for _, want := range []string{
		"Path B: OpenKruise's other workloads are in use;",
		"  PodProbeMarker.apps.kruise.io: 1\n",
		"Lost: OpenKruise's pod webhook is not registered, and with it:\n  1 PodProbeMarker(s): pods on serverless (virtual-kubelet) nodes probed",
		"  the patchPodMetadata whitelist: OpenKruise's ConfigMap kruise-system/kruise-configuration; sidecarops' manager reads none in sidecarops-system\n",
		"  1 pod(s) with a container launch order (apps.kruise.io/container-launch-priority or env KRUISE_CONTAINER_PRIORITY): their containers started one priority after another",
		"OpenKruise's patchPodMetadata whitelist (ConfigMap kruise-system/kruise-configuration, key SidecarSet_PatchPodMetadata_WhiteList) is not the one sidecarops' manager reads (in sidecarops-system: none)",
		"SidecarSet logs would be refused by sidecarops: spec.patchPodMetadata: Required value: SidecarSet patch metadata whitelist not found",
		"2 pod(s) in namespace check-edge were injected by OpenKruise (kruise.io/sidecarset-hash) and sidecarops' pod webhook, as the chart installs it by default in sidecarops-system (no MutatingWebhookConfiguration sidecarops yet), will not see them: namespace check-edge is labelled control-plane, a control plane's",
		"fix: kubectl label namespace check-edge control-plane-",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "in namespace check-shop", "the webhook sees check-shop")

	// The fixes as the report writes them: the whitelist copied where the manager reads it, the
	// namespace's label taken off.
	_, copyCommand, found := strings.Cut(out, "or copy it: ")
	require.True(t, found, "the report says how to copy the whitelist")
	copyCommand, _, _ = strings.Cut(copyCommand, "\n")
	for _, fix := range []string{copyCommand, "kubectl label namespace " + edge + " control-plane-"} {
		cmd := exec.Command("bash", "-c", fix) // #nosec G204 -- the report's own command
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", fix, b)
	}
	require.NoError(t, c.Get(ctx(t), client.ObjectKeyFromObject(copied), copied))
	assert.Equal(t, whitelist.Data, copied.Data, "the copy holds the whitelist")

	out, _ = migrateCheck(t, ctl, asChecker)
	t.Logf("migrate check after the fixes:\n%s", out)
	assert.Contains(t, out, "  the patchPodMetadata whitelist: OpenKruise's ConfigMap kruise-system/kruise-configuration; sidecarops' manager reads ConfigMap sidecarops-system/kruise-configuration\n")
	for _, gone := range []string{"patchPodMetadata whitelist (ConfigMap", "SidecarSet logs would be refused", "in namespace check-edge"} {
		assert.NotContains(t, out, gone)
	}
}

// impersonatingKubeconfig is the suite's kubeconfig acting as user (the administrator may
// impersonate anyone), as a kubeconfig of that user's own would.
func impersonatingKubeconfig(t *testing.T, user string) string {
	cfg, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	require.NoError(t, err)
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// migrateCheck runs sidecarctl migrate check on the cluster of kubeconfig, and says its output and
// exit status.
func migrateCheck(t *testing.T, bin, kubeconfig string) (string, int) {
	t.Helper()
	out, err := exec.Command(bin, "migrate", "check", "--kubeconfig", kubeconfig, "--namespace", devcluster.Namespace).CombinedOutput() // #nosec G204 -- the test's own build
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	require.NoError(t, err)
	return string(out), 0
}
