package manifests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/internal/testing/render"
)

const (
	chartDir   = "../../charts/sidecarops"
	fullValues = chartDir + "/ci/full-values.yaml"
	namespace  = "sidecarops-system"
)

// chart renders the chart as `helm template sidecarops charts/sidecarops -n sidecarops-system` with
// the values files and --set arguments given.
func chart(t *testing.T, valuesFiles []string, sets ...string) render.Objects {
	t.Helper()
	objs, err := render.Chart(t.TempDir(), chartDir, "sidecarops", namespace, valuesFiles, sets...)
	require.NoError(t, err)
	return objs
}

// helmLabels are the labels the chart adds to every object (config/ has none of them); selectors do
// not use them, so an upgrade from config/default to the chart keeps every selector.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// cut removes the value at path (map keys and list indexes) from obj and returns it; the test
// fails if there is none.
func cut(t *testing.T, obj map[string]any, path ...any) any {
	t.Helper()
	var cur any = obj
	for i, p := range path {
		last := i == len(path)-1
		switch p := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			require.True(t, ok, "%v: %v is not a map", path, path[:i])
			v, ok := m[p]
			require.True(t, ok, "%v: no %q", path, p)
			if last {
				delete(m, p)
				return v
			}
			cur = v
		case int:
			l, ok := cur.([]any)
			require.True(t, ok && p < len(l), "%v: no item %d", path, p)
			if last {
				require.FailNow(t, "cut removes map entries only", "%v", path)
			}
			cur = l[p]
		}
	}
	return nil
}

// stripHelmLabels checks every object of the chart carries Helm's labels and removes them.
func stripHelmLabels(t *testing.T, objs render.Objects) {
	t.Helper()
	for k, u := range objs {
		l := u.GetLabels()
		for _, name := range helmLabels {
			assert.NotEmpty(t, l[name], "%s: label %s", k, name)
			delete(l, name)
		}
		if len(l) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "labels")
		} else {
			u.SetLabels(l)
		}
	}
}

// The chart with default values installs what config/default does. Every difference is listed here
// with its reason; any other (a rule, an argument, a webhook field, an object) fails.
func TestChartMatchesConfigDefault(t *testing.T) {
	fromChart := chart(t, nil)
	fromConfig := kustomize(t, "config/default")
	stripHelmLabels(t, fromChart)

	// Helm charts do not own their namespace: `helm install -n sidecarops-system --create-namespace`
	// makes it (without config/default's label, which the pod webhook's exclusion by name replaces).
	require.Contains(t, fromConfig, "Namespace/"+namespace)
	delete(fromConfig, "Namespace/"+namespace)

	crd := "CustomResourceDefinition/sidecarsets.apps.kruise.io"
	// helm uninstall keeps the CRD, so the SidecarSets survive it (crd.keep).
	assert.Equal(t, "keep", cut(t, fromChart[crd].Object, "metadata", "annotations", "helm.sh/resource-policy"))

	deploy := "Deployment/" + namespace + "/sidecarops-manager"
	// The chart's image defaults to its appVersion; config/default's is config/manager's images: entry,
	// the same version (TestKustomizeImages). Either is replaced at install or release.
	assert.Equal(t, "ghcr.io/sidecarops/manager:v0.1.0", cut(t, fromChart[deploy].Object, "spec", "template", "spec", "containers", 0, "image"))
	assert.Equal(t, "ghcr.io/sidecarops/manager:v0.1.0", cut(t, fromConfig[deploy].Object, "spec", "template", "spec", "containers", 0, "image"))

	// The pod webhook skips the manager's namespace, config/default by its sidecarops.io/control-plane
	// label, the chart (whose namespace Helm creates unlabelled) by name too; and, as OpenKruise's,
	// namespaces labelled control-plane. kube-system is seen.
	mwc := "MutatingWebhookConfiguration/sidecarops"
	labelled := []any{
		map[string]any{"key": "sidecarops.io/control-plane", "operator": "DoesNotExist"},
		map[string]any{"key": "control-plane", "operator": "DoesNotExist"},
	}
	assert.Equal(t, labelled, cut(t, fromConfig[mwc].Object, "webhooks", 0, "namespaceSelector", "matchExpressions"))
	byName := map[string]any{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{namespace}}
	assert.Equal(t, append([]any{byName}, labelled...), cut(t, fromChart[mwc].Object, "webhooks", 0, "namespaceSelector", "matchExpressions"))

	require.ElementsMatch(t, keys(fromConfig), keys(fromChart), "the same objects")
	for k, want := range fromConfig {
		assert.Equal(t, want.Object, fromChart[k].Object, "%s differs between config/default and the chart", k)
	}
}

// The agent's RBAC and admission policy from the chart are config/agent's and config/agent-policy's.
func TestChartAgentMatchesConfigAgent(t *testing.T) {
	fromChart := chart(t, nil, "agent.rbac.enabled=true", "agent.rbac.namespaces={games}",
		// config/agent carries the example's storageConfig.target rule (examples/sidecar-agent).
		"agent.rbac.extraRules[0].apiGroups={game.kruise.io}", "agent.rbac.extraRules[0].resources={gameservers}",
		"agent.rbac.extraRules[0].verbs={get,patch}")
	fromConfig := kustomize(t, "config/agent")
	for k, u := range kustomize(t, "config/agent-policy") {
		fromConfig[k] = u
	}
	for k := range chart(t, nil) {
		delete(fromChart, k) // the manager's objects, compared above
	}
	// The policy is config/agent-policy's file, copied by make generate: it has no Helm labels.
	verbatim := render.Objects{}
	for _, k := range []string{"ValidatingAdmissionPolicy/sidecar-agent-own-pod", "ValidatingAdmissionPolicyBinding/sidecar-agent-own-pod"} {
		require.Contains(t, fromChart, k)
		verbatim[k] = fromChart[k]
		delete(fromChart, k)
	}
	stripHelmLabels(t, fromChart)
	for k, u := range verbatim {
		fromChart[k] = u
	}
	// The chart's one TokenReview binding names the agent of every namespace it is given; kustomize's
	// namespace fills config/agent's in.
	crb := "ClusterRoleBinding/sidecar-agent-token-review"
	subjects, _, _ := unstructured.NestedSlice(fromChart[crb].Object, "subjects")
	assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "sidecar-agent", "namespace": "games"}}, subjects)

	require.ElementsMatch(t, keys(fromConfig), keys(fromChart), "the same objects")
	for k, want := range fromConfig {
		assert.Equal(t, want.Object, fromChart[k].Object, "%s differs between config/agent and the chart", k)
	}
}

// The agent's Role lets it patch every pod of its namespace, and only the admission policy narrows
// that to its own pod: whenever the chart grants the one it installs the other, with no value to
// leave the policy out.
func TestChartAgentRoleComesWithItsFence(t *testing.T) {
	policy := kustomize(t, "config/agent-policy")
	require.Len(t, policy, 2, "the policy and its binding")
	for _, tc := range []struct {
		name   string
		values []string
		sets   []string
	}{
		{"one namespace", nil, []string{"agent.rbac.enabled=true", "agent.rbac.namespaces={games}"}},
		{"no namespace yet", nil, []string{"agent.rbac.enabled=true"}},
		{"full values", []string{fullValues}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := chart(t, tc.values, tc.sets...)
			for k, want := range policy {
				if assert.Contains(t, objs, k) {
					assert.Equal(t, want.Object, objs[k].Object, "%s is config/agent-policy's", k)
				}
			}
		})
	}
	objs := chart(t, nil)
	for k := range policy {
		assert.NotContains(t, objs, k, "no agent RBAC, nothing to fence")
	}
}

// The NetworkPolicy is off by default; on, it opens the webhook and metrics ports the Deployment
// renders, whatever their numbers, and is config/components/network-policy's with the same values.
func TestChartNetworkPolicy(t *testing.T) {
	key := "NetworkPolicy/" + namespace + "/sidecarops-manager"
	assert.NotContains(t, chart(t, nil), key)
	byName := func(names ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: names},
		}}
	}
	for _, tc := range []struct {
		name        string
		values      []string
		sets        []string
		metricsFrom *metav1.LabelSelector
	}{
		{"defaults", nil, []string{"networkPolicy.enabled=true"}, byName("monitoring")},
		{"namespaces", nil, []string{"networkPolicy.enabled=true", "networkPolicy.metricsNamespaces={prometheus,grafana-agent}"}, byName("prometheus", "grafana-agent")},
		{"a selector, not merged into the names", []string{fullValues}, nil, &metav1.LabelSelector{MatchLabels: map[string]string{"team": "observability"}}},
		{"no metrics", nil, []string{"networkPolicy.enabled=true", "manager.metrics.enabled=false"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertNetworkPolicyFits(t, chart(t, tc.values, tc.sets...), namespace, tc.metricsFrom)
		})
	}

	fromChart := render.Objects{key: chart(t, nil, "networkPolicy.enabled=true")[key]}
	stripHelmLabels(t, fromChart)
	assert.Equal(t, kustomize(t, "config/samples/network-policy")[key].Object, fromChart[key].Object)
}

func keys(objs render.Objects) []string {
	out := make([]string, 0, len(objs))
	for k := range objs {
		out = append(out, k)
	}
	return out
}

func TestChartLint(t *testing.T) {
	for _, values := range [][]string{nil, {fullValues}} {
		args := []string{"lint", chartDir, "--strict", "--namespace", namespace}
		for _, f := range values {
			args = append(args, "--values", f)
		}
		out, err := render.Helm(t.TempDir(), args...)
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "1 chart(s) linted, 0 chart(s) failed")
	}
}

// Every value away from its default (ci/full-values.yaml) lands where the manager and the API server
// read it.
func TestChartNonDefaultValues(t *testing.T) {
	objs := chart(t, []string{fullValues})
	d := as[appsv1.Deployment](t, objs["Deployment/"+namespace+"/sidecarops-manager"])
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	assert.Equal(t, "registry.example.com/platform/manager:v0.1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", c.Image, "by tag and digest")
	assert.Equal(t, corev1.PullAlways, c.ImagePullPolicy)
	assert.Equal(t, "system-cluster-critical", pod.PriorityClassName)
	assert.Equal(t, map[string]string{"kubernetes.io/os": "linux"}, pod.NodeSelector)
	assert.Len(t, pod.Tolerations, 1)
	require.NotNil(t, pod.Affinity.NodeAffinity)
	assert.Nil(t, pod.Affinity.PodAntiAffinity, "the given affinity replaces the default one")
	assert.Equal(t, "platform", d.Spec.Template.Labels["team"])
	assert.Equal(t, "sidecarops", d.Spec.Template.Labels["app.kubernetes.io/name"], "selector labels stay")
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "registry-creds"}}, pod.ImagePullSecrets)
	assert.Equal(t, "1Gi", c.Resources.Limits.Memory().String())
	assert.True(t, pod.HostNetwork, "manager.hostNetwork")
	assert.Equal(t, corev1.DNSClusterFirstWithHostNet, pod.DNSPolicy, "Services still resolve on the node's network")
	sa := as[corev1.ServiceAccount](t, objs["ServiceAccount/"+namespace+"/sidecarops-manager"])
	assert.Equal(t, map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/sidecarops"}, sa.Annotations)

	assert.Equal(t, []string{
		"--leader-elect", "--webhook-port=10260", "--health-probe-bind-address=:9081", "--metrics-bind-address=:9443",
		"--cert-dir=/var/run/sidecarops/certs", "--cert-mode=external",
		"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=4s",
		"--fail-open", "--pod-webhook-prefilter=false", "--enable-http2", "--metrics-insecure", "--decision-log=false",
		"--zap-log-level=debug", "--sidecarset-workers=5", "--openkruise-kept", "--revision-namespace=kruise-system",
		"--patch-metadata-defaults-allowed",
		"--bundle=/etc/sidecarops/bundles/gates", "--bundle=/etc/sidecarops/bundles/whitelist",
		"--bundle-url=https://bundles.example.com/gates.tar.gz", "--bundle-poll-interval=10s", "--bundle-download-timeout=30s",
		"--verification-key=/etc/sidecarops/verification/key.pem", "--verification-alg=ES256", "--verification-scope=sidecarops",
		"--gc-percent=200",
	}, c.Args)
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	assert.Equal(t, map[string]string{
		"certs": "/var/run/sidecarops/certs", "bundle-gates": "/etc/sidecarops/bundles/gates",
		"bundle-whitelist": "/etc/sidecarops/bundles/whitelist", "verification": "/etc/sidecarops/verification",
	}, mounts, "no persist dir (bundles.persist false); each bundle and the key mounted where its flag points")
	vols := map[string]corev1.VolumeSource{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v.VolumeSource
	}
	assert.Equal(t, "sidecarops-gates", vols["bundle-gates"].ConfigMap.Name)
	assert.Equal(t, "sidecarops-whitelist", vols["bundle-whitelist"].Secret.SecretName)
	assert.Equal(t, "sidecarops-bundle-key", vols["verification"].Secret.SecretName)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	assert.Equal(t, map[string]int32{"webhook": 10260, "metrics": 9443, "health": 9081}, ports)

	m := as[admissionregv1.MutatingWebhookConfiguration](t, objs["MutatingWebhookConfiguration/sidecarops"])
	v := as[admissionregv1.ValidatingWebhookConfiguration](t, objs["ValidatingWebhookConfiguration/sidecarops"])
	assert.Equal(t, admissionregv1.Ignore, *m.Webhooks[0].FailurePolicy, "the pod webhook's failurePolicy")
	assert.Equal(t, admissionregv1.Fail, *m.Webhooks[1].FailurePolicy, "SidecarSet webhooks always fail closed")
	assert.Equal(t, admissionregv1.Fail, *v.Webhooks[0].FailurePolicy)
	for _, w := range append(m.Webhooks, admissionregv1.MutatingWebhook{Name: v.Webhooks[0].Name, TimeoutSeconds: v.Webhooks[0].TimeoutSeconds}) {
		assert.Equal(t, int32(5), *w.TimeoutSeconds, w.Name)
	}
	assert.Equal(t, &metav1.LabelSelector{
		MatchLabels: map[string]string{"sidecarops.io/injection": "enabled"},
		MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{namespace, "monitoring", "kube-system"}},
			{Key: "sidecarops.io/control-plane", Operator: metav1.LabelSelectorOpDoesNotExist},
			{Key: "control-plane", Operator: metav1.LabelSelectorOpDoesNotExist},
			{Key: "environment", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"sandbox"}},
		},
	}, m.Webhooks[0].NamespaceSelector, "the exclusions, each namespace listed once, and the administrator's selector")
	assert.Equal(t, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "sidecarops.io/inject", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"false"}},
	}}, m.Webhooks[0].ObjectSelector)
	assert.Nil(t, m.Webhooks[1].ObjectSelector, "the pod webhook's selectors only")

	// cert-manager makes the certificate and its cainjector writes every caBundle.
	assert.NotContains(t, objs, "Secret/"+namespace+"/sidecarops-webhook-cert", "cert-manager creates the Secret")
	assert.NotContains(t, objs, "Issuer/"+namespace+"/sidecarops-selfsigned", "the given issuer is used")
	cert := objs["Certificate/"+namespace+"/sidecarops-webhook-cert"]
	require.NotNil(t, cert)
	issuer, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef")
	assert.Equal(t, map[string]string{"name": "platform-ca", "kind": "ClusterIssuer"}, issuer)
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	assert.Contains(t, dns, "sidecarops-webhook."+namespace+".svc", "the name the API server checks")
	for _, k := range []string{"MutatingWebhookConfiguration/sidecarops", "ValidatingWebhookConfiguration/sidecarops"} {
		assert.Equal(t, namespace+"/sidecarops-webhook-cert", objs[k].GetAnnotations()["cert-manager.io/inject-ca-from"], k)
	}
	assert.NotContains(t, objs, "CustomResourceDefinition/sidecarsets.apps.kruise.io", "next to a kept OpenKruise the CRD stays OpenKruise's")

	pdb := as[policyv1.PodDisruptionBudget](t, objs["PodDisruptionBudget/"+namespace+"/sidecarops-manager"])
	assert.Equal(t, int32(2), pdb.Spec.MinAvailable.IntVal)

	// The whitelist as OpenKruise's ConfigMap holds it.
	cm := as[corev1.ConfigMap](t, objs["ConfigMap/"+namespace+"/"+v1beta1.KruiseConfigurationName])
	var wl map[string]any
	require.NoError(t, json.Unmarshal([]byte(cm.Data[v1beta1.PatchPodMetadataWhiteListKey]), &wl))
	assert.Equal(t, map[string]any{"rules": []any{map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{"team": "platform"}}, "allowedAnnotationKeyExprs": []any{"^oom-score$"},
	}}}, wl)

	// The history kept in kruise-system, with the rights there.
	role := as[rbacv1.Role](t, objs["Role/kruise-system/sidecarops-manager-revisions"])
	assert.Equal(t, []string{"controllerrevisions"}, role.Rules[0].Resources)
	require.Contains(t, objs, "RoleBinding/kruise-system/sidecarops-manager-revisions")

	// The agent in both namespaces, one TokenReview binding for both.
	for _, ns := range []string{"games", "web"} {
		for _, k := range []string{"ServiceAccount", "Role", "RoleBinding"} {
			assert.Contains(t, objs, k+"/"+ns+"/sidecar-agent")
		}
		r := as[rbacv1.Role](t, objs["Role/"+ns+"/sidecar-agent"])
		assert.Equal(t, []string{"gameservers"}, r.Rules[len(r.Rules)-1].Resources, "extraRules appended")
	}
	crb := as[rbacv1.ClusterRoleBinding](t, objs["ClusterRoleBinding/sidecar-agent-token-review"])
	assert.Len(t, crb.Subjects, 2)
	assert.Contains(t, objs, "ValidatingAdmissionPolicy/sidecar-agent-own-pod")
}

// The arguments the chart gives the manager are flags the manager knows: it parses them all before
// --version prints and exits (an unknown flag exits 2).
func TestChartArgsAreTheManagersFlags(t *testing.T) {
	bin, err := devcluster.Build("../..", "sidecarops-manager", t.TempDir())
	require.NoError(t, err)
	for name, values := range map[string][]string{"defaults": nil, "full": {fullValues}} {
		t.Run(name, func(t *testing.T) {
			d := as[appsv1.Deployment](t, chart(t, values)["Deployment/"+namespace+"/sidecarops-manager"])
			cmd := exec.Command(bin, append(d.Spec.Template.Spec.Containers[0].Args, "--version")...) // #nosec G204 -- the chart's own arguments
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Contains(t, string(out), "sidecarops-manager")
		})
	}
}

// values.schema.json refuses values the templates would turn into a broken installation, naming the
// value.
func TestChartRejectsBadValues(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"manager.replicas=0", "/manager/replicas"},
		{"webhookConfiguration.failurePolicy.pods=Never", "/webhookConfiguration/failurePolicy/pods"},
		// Half of failing open is refused (issue 30): both or neither.
		{"webhookConfiguration.failurePolicy.pods=Ignore", "/webhookConfiguration/failOpen"},
		{"webhookConfiguration.failOpen=true", "/webhookConfiguration/failOpen"},
		{"webhookConfiguration.timeoutSeconds=31", "/webhookConfiguration/timeoutSeconds"},
		{"manager.webhook.port=70000", "/manager/webhook/port"},
		{"webhookConfiguration.excludedNamespaces={Bad_NS}", "/webhookConfiguration/excludedNamespaces/0"},
		{"webhookConfiguration.objectSelector.matchExpressions[0].operator=Equals", "/webhookConfiguration/objectSelector/matchExpressions/0/operator"},
		{"manager.image.digest=sha256:abc", "/manager/image/digest"},
		{"manager.image.repository=", "/manager/image/repository"},
		{"certificates.provider=vault", "/certificates/provider"},
		{"leaderElection.leaseDuration=15", "/leaderElection/leaseDuration"},
		{"bundles.files[0].name=gates", "/bundles/files/0"},
		{"bundles.urls={ftp://example.com/b.tar.gz}", "/bundles/urls/0"},
		{"bundles.verification.alg=none", "/bundles/verification/alg"},
		{"manager.log.level=verbose", "/manager/log/level"},
		{"sidecarsetWorkers=0", "/sidecarsetWorkers"},
		{"extraArgs={leader-elect}", "/extraArgs/0"},
		{"unknown=1", "additional properties 'unknown' not allowed"},
		{"webhookConfiguration.prefiltr=false", "additional properties 'prefiltr' not allowed"},
		// The switch that could leave the agent's Role unfenced is gone, and saying so fails loudly.
		{"agent.ownPodPolicy.enabled=false", "additional properties 'ownPodPolicy' not allowed"},
		{"networkPolicy.metricsNamespaces={}", "/networkPolicy/metricsNamespaces"},
		{"networkPolicy.metricsNamespaceSelector.matchExpressions[0].operator=Equals", "/networkPolicy/metricsNamespaceSelector/matchExpressions/0/operator"},
		{"featureGates=SidecarSetPatchPodMetadataDefaultsAllowed", "/featureGates"},
		// A gate that would change nothing here is refused by name, with the gates that do.
		{"featureGates=ResourcesDeletionProtection=true\\,SidecarSetPatchPodMetadataDefaultsAllowed=true\\,AllAlpha=false",
			"featureGates: ResourcesDeletionProtection=true, AllAlpha=false: not what sidecarops honours (it takes SidecarSetPatchPodMetadataDefaultsAllowed, PodWebhook=true and EnableSortSidecarContainerByName=false)"},
		{"featureGates=EnableSortSidecarContainerByName=true", "featureGates: EnableSortSidecarContainerByName=true: not what sidecarops honours"},
		{"featureGates=PodWebhook=false", "PodWebhook=false turns off the pod webhook, which is all sidecarops does"},
		// OpenKruise's values are named, each with what takes its place, and the table pointed to.
		{"installation.namespace=kruise-system", "installation (here: the release's namespace is helm's --namespace"},
		{"manager.nodeAffinity.foo=bar", "manager.nodeAffinity (here: manager.affinity.nodeAffinity)"},
		{"daemon.port=10221", `docs/install.md, "Values from OpenKruise's chart", maps each of them`},
		{"manager.image.repository=openkruise/kruise-manager", "manager.image.repository openkruise/kruise-manager (here: sidecarops' manager image"},
		// Half of failing open, in the old place, points nowhere: the key is gone.
		{"webhook.failurePolicy=Ignore", "additional properties 'webhook' not allowed"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := render.Chart(t.TempDir(), chartDir, "sidecarops", namespace, nil, tc.set)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// featureGates takes OpenKruise's chart's string: a gate sidecarops honours becomes the manager's
// flag; PodWebhook=true, OpenKruise's default, changes nothing.
func TestChartFeatureGates(t *testing.T) {
	for _, tc := range []struct {
		gates           string
		defaultsAllowed bool
	}{
		{"", false},
		{"PodWebhook=true", false},
		{"SidecarSetPatchPodMetadataDefaultsAllowed=false", false},
		{"SidecarSetPatchPodMetadataDefaultsAllowed=true", true},
		{`PodWebhook=true\,SidecarSetPatchPodMetadataDefaultsAllowed=true`, true},
		// What sidecarops always does, as OpenKruise does it with the gate off.
		{"EnableSortSidecarContainerByName=false", false},
	} {
		t.Run(tc.gates, func(t *testing.T) {
			d := as[appsv1.Deployment](t, chart(t, nil, "featureGates="+tc.gates)["Deployment/"+namespace+"/sidecarops-manager"])
			assert.Equal(t, tc.defaultsAllowed, slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--patch-metadata-defaults-allowed"))
		})
	}
}

// The pod webhook's selectors: the exclusions always, the administrator's namespace selector added
// to them, and an object selector only when one selects something (an empty one would be the
// chart's to own, and keep the prefilter from registering its own).
func TestChartPodWebhookSelectors(t *testing.T) {
	mwc := "MutatingWebhookConfiguration/sidecarops"
	excluded := []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{namespace}},
		{Key: "sidecarops.io/control-plane", Operator: metav1.LabelSelectorOpDoesNotExist},
		{Key: "control-plane", Operator: metav1.LabelSelectorOpDoesNotExist},
	}
	empty := filepath.Join(t.TempDir(), "empty-selectors.yaml")
	require.NoError(t, os.WriteFile(empty, []byte("webhookConfiguration: {namespaceSelector: {matchLabels: {}}, objectSelector: {matchLabels: {}, matchExpressions: []}}\n"), 0o600))
	for _, tc := range []struct {
		name              string
		values            []string
		sets              []string
		namespaceSelector *metav1.LabelSelector
		objectSelector    *metav1.LabelSelector
	}{
		{"defaults", nil, nil, &metav1.LabelSelector{MatchExpressions: excluded}, nil},
		{"empty selectors", []string{empty}, nil, &metav1.LabelSelector{MatchExpressions: excluded}, nil},
		{"namespace labels", nil, []string{"webhookConfiguration.namespaceSelector.matchLabels.team=web"},
			&metav1.LabelSelector{MatchLabels: map[string]string{"team": "web"}, MatchExpressions: excluded}, nil},
		{"object labels", nil, []string{"webhookConfiguration.objectSelector.matchLabels.sidecars=enabled"},
			&metav1.LabelSelector{MatchExpressions: excluded}, &metav1.LabelSelector{MatchLabels: map[string]string{"sidecars": "enabled"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := as[admissionregv1.MutatingWebhookConfiguration](t, chart(t, tc.values, tc.sets...)[mwc])
			assert.Equal(t, tc.namespaceSelector, m.Webhooks[0].NamespaceSelector)
			assert.Equal(t, tc.objectSelector, m.Webhooks[0].ObjectSelector)
		})
	}
}

// NOTES.txt, which helm install prints, states the pod webhook's failure policy and its trade-off.
func TestChartNotes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		values    []string
		want, not []string
	}{
		{"fail closed", nil,
			[]string{"The pod webhook fails closed", "set webhookConfiguration.failurePolicy.pods: Ignore with webhookConfiguration.failOpen: true", "kubectl get sidecarsets"},
			[]string{"WITHOUT", "Only pods that"}},
		{"fail open, selectors", []string{fullValues},
			[]string{"The pod webhook fails open", "created WITHOUT their\nsidecars", "Only pods that webhookConfiguration.namespaceSelector and objectSelector select"},
			[]string{"fails closed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"install", "sidecarops", chartDir, "--namespace", namespace, "--dry-run=client"}
			for _, f := range tc.values {
				args = append(args, "--values", f)
			}
			out, err := render.Helm(t.TempDir(), args...)
			require.NoError(t, err, "%s", out)
			_, notes, found := strings.Cut(string(out), "\nNOTES:\n")
			require.True(t, found, "%s", out)
			for _, s := range tc.want {
				assert.Contains(t, notes, s)
			}
			for _, s := range tc.not {
				assert.NotContains(t, notes, s)
			}
		})
	}
}

// An OpenKruise values file (the keys of openkruise/kruise v1.8's values.yaml) fails with every value
// this chart does not take named, each one in docs/install.md's table; its values under the names
// both charts share are taken.
func TestChartNamesOpenKruiseValues(t *testing.T) {
	shared := `imagePullSecrets: []
manager:
  log: {level: "4"}
  replicas: 2
  webhook: {port: 9876}
  metrics: {port: 8080}
  healthProbe: {port: 8000}
  resources: {limits: {cpu: 200m, memory: 512Mi}, requests: {cpu: 100m, memory: 256Mi}}
  hostNetwork: false
  nodeSelector: {}
  tolerations: []
webhookConfiguration: {timeoutSeconds: 30}
serviceAccount: {annotations: {}}
`
	kruiseOnly := `crds: {managed: true}
installation: {namespace: kruise-system, createNamespace: true, roleListGroups: ["*"]}
externalCerts: {annotations: {}}
enableKubeCacheMutationDetector: false
daemon: {port: 10221}
helmHooks: {image: {repository: openkruise/kruise-helm-hook, tag: v0.1.0}}
`
	managerOnly := `  pprofAddr: localhost:8090
  resyncPeriod: "0"
  loggingFormat: ""
  nodeAffinity: {}
`
	dir := t.TempDir()
	kruise, ours := filepath.Join(dir, "kruise-values.yaml"), filepath.Join(dir, "shared-values.yaml")
	require.NoError(t, os.WriteFile(kruise, []byte(kruiseOnly+strings.Replace(shared, "manager:\n", "manager:\n"+managerOnly, 1)), 0o600))
	require.NoError(t, os.WriteFile(ours, []byte(shared), 0o600))

	_, err := render.Chart(t.TempDir(), chartDir, "sidecarops", namespace, []string{kruise})
	require.Error(t, err)
	doc, readErr := os.ReadFile("../../docs/install.md")
	require.NoError(t, readErr)
	for _, k := range []string{"crds", "installation", "externalCerts", "enableKubeCacheMutationDetector", "daemon", "helmHooks",
		"manager.pprofAddr", "manager.resyncPeriod", "manager.loggingFormat", "manager.nodeAffinity"} {
		assert.Contains(t, err.Error(), k+" (here: ")
		assert.Contains(t, string(doc), "| `"+k, "docs/install.md's table has %s", k)
	}

	// Without them, the rest installs as OpenKruise's chart would set it.
	d := as[appsv1.Deployment](t, chart(t, []string{ours})["Deployment/"+namespace+"/sidecarops-manager"])
	c := d.Spec.Template.Spec.Containers[0]
	assert.Subset(t, c.Args, []string{"--webhook-port=9876", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8000", "--zap-log-level=4"})
	assert.Equal(t, "200m", c.Resources.Limits.Cpu().String())
}
