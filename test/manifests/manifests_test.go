package manifests

import (
	"cmp"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/internal/podwebhook"
	"github.com/sidecarops/sidecarops/internal/testing/render"
)

// kustomize runs `kubectl kustomize` on an overlay, as an administrator would before applying it.
func kustomize(t *testing.T, dir string) render.Objects {
	t.Helper()
	objs, err := render.Kustomize("../../" + dir)
	require.NoError(t, err)
	return objs
}

func as[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	require.NotNil(t, u)
	var out T
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out))
	return &out
}

func TestDefaultInstallation(t *testing.T) {
	objs := kustomize(t, "config/default")
	for _, k := range []string{
		"Namespace/sidecarops-system", "CustomResourceDefinition/sidecarsets.apps.kruise.io",
		"ServiceAccount/sidecarops-system/sidecarops-manager", "ClusterRole/sidecarops-manager", "ClusterRoleBinding/sidecarops-manager",
		"Role/sidecarops-system/sidecarops-manager", "RoleBinding/sidecarops-system/sidecarops-manager", "Deployment/sidecarops-system/sidecarops-manager",
		"Service/sidecarops-system/sidecarops-webhook", "PodDisruptionBudget/sidecarops-system/sidecarops-manager",
		"MutatingWebhookConfiguration/sidecarops", "ValidatingWebhookConfiguration/sidecarops",
		"Secret/sidecarops-system/sidecarops-webhook-cert", "ClusterRole/sidecarops-metrics-reader",
	} {
		assert.Contains(t, objs, k)
	}
	assert.Len(t, objs, 14)

	d := as[appsv1.Deployment](t, objs["Deployment/sidecarops-system/sidecarops-manager"])
	assert.Equal(t, int32(2), *d.Spec.Replicas)
	mgr := d.Spec.Template.Spec.Containers[0]
	assert.Contains(t, mgr.Args, "--leader-elect", "one replica runs the SidecarSet controller")
	assert.NotContains(t, mgr.Args, "--metrics-insecure", "metrics are HTTPS for callers allowed GET /metrics")
	require.NotNil(t, mgr.Lifecycle, "a preStop hook drains the replica before SIGTERM")
	require.NotNil(t, mgr.Lifecycle.PreStop.Sleep, "a sleep action: the image has no shell")
	assert.Positive(t, mgr.Lifecycle.PreStop.Sleep.Seconds)
	assert.Greater(t, *d.Spec.Template.Spec.TerminationGracePeriodSeconds, mgr.Lifecycle.PreStop.Sleep.Seconds+30,
		"room for the drain and --graceful-shutdown-timeout (30 s)")
	reader := as[rbacv1.ClusterRole](t, objs["ClusterRole/sidecarops-metrics-reader"]).Rules
	assert.Equal(t, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, reader,
		"reading the metrics is a role of its own, granted to the scraper")
	for _, e := range mgr.Env {
		assert.NotEqual(t, "GOMEMLIMIT", e.Name, "GOMEMLIMIT would win over --memory-limit's 90% of the container's limit")
	}
	assert.False(t, mgr.Resources.Limits.Memory().IsZero(), "a memory limit, of which the manager makes 90% its soft memory limit")

	m := as[admissionregv1.MutatingWebhookConfiguration](t, objs["MutatingWebhookConfiguration/sidecarops"])
	v := as[admissionregv1.ValidatingWebhookConfiguration](t, objs["ValidatingWebhookConfiguration/sidecarops"])
	paths := map[string]string{}
	// The pod webhook's one side effect, the Pod Security Event, is skipped on a dry run; the
	// defaulting webhook has none.
	sideEffects := map[string]admissionregv1.SideEffectClass{podwebhook.WebhookName: admissionregv1.SideEffectClassNoneOnDryRun}
	for _, w := range m.Webhooks {
		paths[w.Name] = *w.ClientConfig.Service.Path
		assert.Equal(t, cmp.Or(sideEffects[w.Name], admissionregv1.SideEffectClassNone), *w.SideEffects, w.Name)
		assert.Equal(t, int32(3), *w.TimeoutSeconds, w.Name)
		assert.Equal(t, admissionregv1.Fail, *w.FailurePolicy, w.Name)
		assert.Equal(t, admissionregv1.IfNeededReinvocationPolicy, *w.ReinvocationPolicy, w.Name)
		assert.Equal(t, admissionregv1.Equivalent, *w.MatchPolicy, w.Name)
		assert.Equal(t, "sidecarops-system", w.ClientConfig.Service.Namespace)
	}
	for _, w := range v.Webhooks {
		paths[w.Name] = *w.ClientConfig.Service.Path
		// Admitting a SidecarSet widens the pod webhook's match condition, except in a dry run.
		assert.Equal(t, admissionregv1.SideEffectClassNoneOnDryRun, *w.SideEffects, w.Name)
		assert.Equal(t, int32(3), *w.TimeoutSeconds, w.Name)
		assert.Equal(t, admissionregv1.Fail, *w.FailurePolicy, w.Name)
	}
	assert.Equal(t, map[string]string{
		"mpod.sidecarops.io":        "/mutate-pod",
		"msidecarset.sidecarops.io": "/mutate-apps-kruise-io-v1alpha1-sidecarset",
		"vsidecarset.sidecarops.io": "/validate-apps-kruise-io-v1alpha1-sidecarset",
	}, paths)

	pod := m.Webhooks[0]
	require.Equal(t, "mpod.sidecarops.io", pod.Name)
	assert.Equal(t, []admissionregv1.OperationType{admissionregv1.Create}, pod.Rules[0].Operations, "injection is CREATE-only (compat §1.1)")
}

// The pod webhook never calls the manager for pods of its own namespace (it would wait for itself
// to start), in whatever namespace it is installed. Before, it excluded "sidecarops-system" by name,
// so an overlay that renamed the namespace made the manager block its own pods. As OpenKruise's pod
// webhook, it sees kube-system and skips namespaces labelled control-plane.
func TestPodWebhookSkipsTheManagersNamespace(t *testing.T) {
	for dir, ns := range map[string]string{"config/default": "sidecarops-system", "config/samples/other-namespace": "platform-sidecars"} {
		t.Run(dir, func(t *testing.T) {
			objs := kustomize(t, dir)
			require.Contains(t, objs, "Namespace/"+ns)
			m := as[admissionregv1.MutatingWebhookConfiguration](t, objs["MutatingWebhookConfiguration/sidecarops"])
			require.Equal(t, "mpod.sidecarops.io", m.Webhooks[0].Name)
			assert.Equal(t, ns, m.Webhooks[0].ClientConfig.Service.Namespace)
			sel, err := metav1.LabelSelectorAsSelector(m.Webhooks[0].NamespaceSelector)
			require.NoError(t, err)
			// The API server matches a namespace's labels, which always include its name.
			nsLabels := func(name string, l map[string]string) labels.Set {
				out := labels.Set{"kubernetes.io/metadata.name": name}
				maps.Copy(out, l)
				return out
			}
			own := as[corev1.Namespace](t, objs["Namespace/"+ns])
			assert.False(t, sel.Matches(nsLabels(ns, own.Labels)), "the manager's namespace %s is skipped", ns)
			assert.True(t, sel.Matches(nsLabels("kube-system", nil)), "kube-system is seen, as by OpenKruise")
			assert.False(t, sel.Matches(nsLabels("kruise-system", map[string]string{"control-plane": "controller-manager"})), "OpenKruise's own namespace is skipped")
			assert.True(t, sel.Matches(nsLabels("default", nil)), "other namespaces are injected")
			assert.True(t, sel.Matches(nsLabels("sidecarops-system", nil)), "a name alone exempts nothing")
		})
	}
}

// Least privilege: no wildcards; deletes only of the SidecarSets' ControllerRevisions in the
// manager's own namespace (history truncation); pod access only what an in-place upgrade needs.
func TestRBACIsLeastPrivilege(t *testing.T) {
	objs := kustomize(t, "config/default")
	cluster := as[rbacv1.ClusterRole](t, objs["ClusterRole/sidecarops-manager"]).Rules
	namespaced := as[rbacv1.Role](t, objs["Role/sidecarops-system/sidecarops-manager"]).Rules
	for _, r := range append(append([]rbacv1.PolicyRule{}, cluster...), namespaced...) {
		for _, s := range append(append(append([]string{}, r.Verbs...), r.Resources...), r.APIGroups...) {
			assert.NotEqual(t, "*", s, "wildcard in %+v", r)
		}
	}
	for _, r := range cluster {
		assert.NotContains(t, r.Verbs, "delete", "nothing is deleted cluster-wide: %+v", r)
		assert.NotContains(t, r.Verbs, "deletecollection", "%+v", r)
		assert.NotContains(t, r.Resources, "controllerrevisions", "revisions live in the manager's namespace only: %+v", r)
		if contains(r.Resources, "pods") {
			assert.Equal(t, []string{"get", "list", "watch", "update"}, r.Verbs, "pods: read, and update for in-place upgrades (never create/delete/patch)")
		}
		if contains(r.Resources, "pods/status") {
			assert.Equal(t, []string{"patch"}, r.Verbs, "pods/status: the SidecarSetUpgradable condition only")
		}
	}
	for _, r := range namespaced {
		if contains(r.Verbs, "delete") {
			assert.Equal(t, []string{"controllerrevisions"}, r.Resources, "only revisions are deleted: %+v", r)
		}
	}
}

func TestFailOpenOverlay(t *testing.T) {
	objs := kustomize(t, "config/samples/fail-open")
	m := as[admissionregv1.MutatingWebhookConfiguration](t, objs["MutatingWebhookConfiguration/sidecarops"])
	assert.Equal(t, admissionregv1.Ignore, *m.Webhooks[0].FailurePolicy, "pod webhook fails open")
	assert.Equal(t, admissionregv1.Fail, *m.Webhooks[1].FailurePolicy, "SidecarSet defaulting stays Fail")
	d := as[appsv1.Deployment](t, objs["Deployment/sidecarops-system/sidecarops-manager"])
	assert.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--fail-open",
		"a replica answering before its first compile lets pods through too (not 503)")
	def := as[appsv1.Deployment](t, kustomize(t, "config/default")["Deployment/sidecarops-system/sidecarops-manager"])
	assert.NotContains(t, def.Spec.Template.Spec.Containers[0].Args, "--fail-open", "fail-closed by default")
}

// The takeover overlay keeps the history in kruise-system: the manager's flag, and there the same
// ControllerRevision rights as in its own namespace, bound to its ServiceAccount, and nothing more.
func TestKruiseTakeoverOverlay(t *testing.T) {
	objs := kustomize(t, "config/samples/kruise-takeover")
	d := as[appsv1.Deployment](t, objs["Deployment/sidecarops-system/sidecarops-manager"])
	assert.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--revision-namespace=kruise-system")
	role := as[rbacv1.Role](t, objs["Role/kruise-system/sidecarops-manager-revisions"])
	assert.Equal(t, "kruise-system", role.Namespace)
	own := as[rbacv1.Role](t, objs["Role/sidecarops-system/sidecarops-manager"])
	var revisions rbacv1.PolicyRule
	for _, r := range own.Rules {
		if contains(r.Resources, "controllerrevisions") {
			revisions = r
		}
	}
	assert.Equal(t, []rbacv1.PolicyRule{revisions}, role.Rules)
	binding := as[rbacv1.RoleBinding](t, objs["RoleBinding/kruise-system/sidecarops-manager-revisions"])
	assert.Equal(t, "kruise-system", binding.Namespace)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sidecarops-manager", Namespace: "sidecarops-system"}}, binding.Subjects)
}

// The network-policy overlay is config/default and the NetworkPolicy, which fits the manager it
// comes with.
func TestNetworkPolicyOverlay(t *testing.T) {
	objs := kustomize(t, "config/samples/network-policy")
	key := "NetworkPolicy/sidecarops-system/sidecarops-manager"
	assertNetworkPolicyFits(t, objs, "sidecarops-system", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"monitoring"}},
	}})
	def := kustomize(t, "config/default")
	assert.NotContains(t, def, key, "opt-in")
	delete(objs, key)
	assert.Equal(t, def, objs, "nothing else changes")
}

// assertNetworkPolicyFits checks the manager's NetworkPolicy in objs against the Deployment and
// Service beside it: it selects the manager's pods, opens the port the manager serves webhooks on
// (the one the Service sends the API server's calls to) to every source, the port it serves metrics
// on (none: metricsFrom nil) to the namespaces metricsFrom selects, and nothing else.
func assertNetworkPolicyFits(t *testing.T, objs render.Objects, ns string, metricsFrom *metav1.LabelSelector) {
	t.Helper()
	np := as[networkingv1.NetworkPolicy](t, objs["NetworkPolicy/"+ns+"/sidecarops-manager"])
	d := as[appsv1.Deployment](t, objs["Deployment/"+ns+"/sidecarops-manager"])
	svc := as[corev1.Service](t, objs["Service/"+ns+"/sidecarops-webhook"])
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "the policy selects the manager's pods")
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes, "egress stays open")

	c := d.Spec.Template.Spec.Containers[0]
	resolve := func(p intstr.IntOrString) int32 {
		if p.Type == intstr.Int {
			return p.IntVal
		}
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return cp.ContainerPort
			}
		}
		assert.Fail(t, "a port the manager's container does not name", "%q", p.StrVal)
		return 0
	}
	flagPort := func(name string) int32 {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				port, err := strconv.ParseInt(v[strings.LastIndex(v, ":")+1:], 10, 32)
				require.NoError(t, err, a)
				return int32(port)
			}
		}
		require.FailNow(t, "no flag", "--%s in %v", name, c.Args)
		return 0
	}
	opened := map[int32][]networkingv1.NetworkPolicyPeer{}
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			require.NotNil(t, p.Port, "a rule for every port opens every port")
			assert.Equal(t, corev1.ProtocolTCP, *p.Protocol)
			opened[resolve(*p.Port)] = r.From
		}
	}
	webhook := flagPort("webhook-port")
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, webhook, resolve(svc.Spec.Ports[0].TargetPort), "the Service sends the API server's calls to the webhook port")
	want := map[int32][]networkingv1.NetworkPolicyPeer{webhook: nil}
	if metrics := flagPort("metrics-bind-address"); metricsFrom != nil {
		want[metrics] = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: metricsFrom}}
	} else {
		assert.Zero(t, metrics, "metrics are off")
	}
	assert.Equal(t, want, opened, "ports opened, by number, and to whom (nil: every source)")
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
