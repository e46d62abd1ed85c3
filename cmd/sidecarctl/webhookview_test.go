package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/internal/podwebhook"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/inject"
)

// A DaemonSet the logging example's SidecarSet matches in namespace ns, with ns's Namespace labelled
// as given.
func nodeAgent(ns, nsLabels string) string {
	return `apiVersion: v1
kind: Namespace
metadata:
  name: ` + ns + `
  labels: {` + nsLabels + `}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node-agent
  namespace: ` + ns + `
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: agent
        image: example.com/agent:1
`
}

const assumedNotice = "note: assuming the pod webhook as config/default installs it (--install-values or --kubeconfig give yours): " +
	"not seen by the webhook: in namespaces labelled control-plane, in namespaces labelled sidecarops.io/control-plane\n"

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// TestTheDefaultWebhookSeesKubeSystem: the default install sees kube-system, as OpenKruise's pod
// webhook does, and leaves out namespaces labelled control-plane, as OpenKruise's does (issue 36).
func TestTheDefaultWebhookSeesKubeSystem(t *testing.T) {
	out, errOut, code := sidecarctl(t, "", "explain", "-f", "examples/logging", "-f", writeFile(t, "ds.yaml", nodeAgent("kube-system", "")))
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "Deployment/web (namespace shop):\n  logging-agent: matches\n"+
		"DaemonSet/node-agent (namespace kube-system):\n  logging-agent: matches\n", out)
	assert.Equal(t, assumedNotice, errOut, "explain says the installation assumed")

	out, errOut, code = sidecarctl(t, "", "inject", "-f", "examples/logging", "-f", writeFile(t, "ds.yaml", nodeAgent("kube-system", "")), "--timestamp", ts)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut, "nothing left out, nothing said")
	assert.Equal(t, 2, strings.Count(out, "kruise.io/sidecarset-injected-list: logging-agent\n"), "the Deployment and the DaemonSet in kube-system are injected")
}

// TestTheInstalledWebhookNeverSeesAControlPlane: explain, inject and check agree with the installed
// webhook (issue 31 item 4), here a namespace labelled control-plane. Without --install-values or
// --kubeconfig they assume config/default's and say so once.
func TestTheInstalledWebhookNeverSeesAControlPlane(t *testing.T) {
	ds := writeFile(t, "ds.yaml", nodeAgent("ingress", "control-plane: ingress"))
	const notSeen = "not seen by the webhook: namespace ingress is labelled control-plane, a control plane's"

	out, errOut, code := sidecarctl(t, "", "explain", "-f", "examples/logging", "-f", ds)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "Deployment/web (namespace shop):\n"+
		"  logging-agent: matches\n"+
		"DaemonSet/node-agent (namespace ingress):\n"+
		"  "+notSeen+"\n"+
		"  logging-agent: matches, but the webhook does not see the pod\n", out)
	assert.Equal(t, assumedNotice, errOut)

	out, errOut, code = sidecarctl(t, "", "inject", "-f", "examples/logging", "-f", ds, "--timestamp", ts)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, assumedNotice+ds+": document 2 (DaemonSet/node-agent): not injected: "+notSeen+"\n", errOut)
	docs := decodeDocs(t, out)
	require.Len(t, docs, 2, "the workloads")
	assert.Contains(t, out, "name: log-agent", "the Deployment in shop is injected")
	daemonSet := strings.SplitN(out, "kind: DaemonSet", 2)[1]
	assert.NotContains(t, daemonSet, "log-agent", "the DaemonSet as written")
	assert.Contains(t, daemonSet, "name: agent")

	out, errOut, code = sidecarctl(t, "", "inject", "-f", ds, "--patch", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var patches []inject.Patch
	require.NoError(t, json.Unmarshal([]byte(out), &patches))
	require.Len(t, patches, 1)
	assert.Empty(t, patches[0].Patch)

	// check: a workload a SidecarSet matches but will never inject, and a SidecarSet scoped to
	// that namespace alone, are warnings.
	scoped := writeFile(t, "scoped.yaml", `apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata:
  name: system-agent
spec:
  namespace: ingress
  selector:
    matchLabels:
      app: web
  containers:
  - name: agent
    image: example.com/agent:1
`)
	out, errOut, code = sidecarctl(t, "", "check", "-f", "examples/logging", "-f", ds, "-f", scoped)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "2 SidecarSet(s) checked: no errors; 2 warning(s)\n", out)
	assert.True(t, strings.HasPrefix(errOut, assumedNotice), errOut)
	assert.Equal(t, 1, strings.Count(errOut, "note: "))
	assert.Contains(t, errOut, " document 1 (SidecarSet/system-agent): spec.namespace: injects nothing: "+notSeen+"\n")
	assert.Contains(t, errOut, " document 2 (DaemonSet/node-agent): "+notSeen+": created without the sidecars of logging-agent, system-agent, which match it\n")

	// In check's JSON both are findings of the webhook rule.
	out, _, code = sidecarctl(t, "", "check", "-o", "json", "-f", "examples/logging", "-f", ds, "-f", scoped)
	require.Equal(t, 0, code)
	var report struct {
		Findings []struct{ Kind, Rule, Severity string }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &report))
	var rules []string
	for _, f := range report.Findings {
		rules = append(rules, f.Kind+" "+f.Severity+" "+f.Rule)
	}
	assert.ElementsMatch(t, []string{"SidecarSet warning webhook", "DaemonSet warning webhook"}, rules)

	// Nothing to say, nothing said.
	_, errOut, code = sidecarctl(t, "", "check", "-f", "examples/logging")
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
}

// TestInstallValues: the chart's webhookConfiguration values, as its template renders them; keys a
// values file leaves out take the chart's defaults.
func TestInstallValues(t *testing.T) {
	pods := writeFile(t, "pods.yaml", `apiVersion: v1
kind: Namespace
metadata:
  name: meshed
  labels:
    mesh: enabled
---
apiVersion: v1
kind: Namespace
metadata:
  name: plain
---
`+strings.Join([]string{
		podIn("ops", "app: web"),        // the release's namespace
		podIn("monitoring", "app: web"), // excluded by name
		podIn("plain", "app: web"),      // outside the namespace selector
		podIn("meshed", "app: web\n    sidecar: \"off\""),
		podIn("meshed", "app: web"),
	}, "---\n"))
	values := writeFile(t, "values.yaml", `manager:
  replicas: 3
webhookConfiguration:
  excludedNamespaces: [monitoring]
  namespaceSelector:
    matchLabels:
      mesh: enabled
  objectSelector:
    matchExpressions:
    - {key: sidecar, operator: NotIn, values: ["off"]}
`)
	out, errOut, code := sidecarctl(t, "", "explain", "-f", "examples/logging/sidecarset.yaml", "-f", pods, "--install-values", values, "--install-namespace", "ops")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "note: the pod webhook as the chart installs it with --install-values "+values+" in namespace ops: not seen by the webhook: "+
		"in namespaces labelled control-plane, pods in namespaces ops, monitoring, in namespaces not matching mesh=enabled, in namespaces labelled sidecarops.io/control-plane, "+
		"pods not matching sidecar notin (off)\n", errOut)
	for _, want := range []string{
		"Pod/p-ops (namespace ops):\n  not seen by the webhook: namespace ops is excluded\n",
		"Pod/p-monitoring (namespace monitoring):\n  not seen by the webhook: namespace monitoring is excluded\n",
		"Pod/p-plain (namespace plain):\n  not seen by the webhook: namespace plain does not match its namespaceSelector (mesh=enabled)\n",
		"Pod/p-meshed (namespace meshed):\n  not seen by the webhook: the pod does not match its objectSelector (sidecar notin (off))\n",
		"Pod/p-meshed (namespace meshed):\n  logging-agent: matches\n",
	} {
		assert.Contains(t, out, want)
	}

	// The chart's own defaults, and a values file without any of these keys: the release's namespace
	// only, kube-system seen.
	for _, v := range []string{"charts/sidecarops/values.yaml", writeFile(t, "empty.yaml", "manager: {replicas: 1}\n")} {
		out, errOut, code := sidecarctl(t, "", "explain", "-f", "examples/logging/sidecarset.yaml", "-f", pods, "--install-values", v, "--install-namespace", "ops")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, errOut, "not seen by the webhook: in namespaces labelled control-plane, pods in namespaces ops, in namespaces labelled sidecarops.io/control-plane\n", v)
		assert.Contains(t, out, "Pod/p-ops (namespace ops):\n  not seen by the webhook: namespace ops is excluded\n", v)
		assert.Contains(t, out, "Pod/p-plain (namespace plain):\n  logging-agent: matches\n", v)
	}

	_, errOut, code = sidecarctl(t, "", "explain", "-f", pods, "--install-values", filepath.Join(t.TempDir(), "missing.yaml"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--install-values: open ")
	_, errOut, code = sidecarctl(t, "", "check", "-f", pods, "--install-values", values, "--kubeconfig", values)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--install-values and --kubeconfig/--context: give one, not both")
}

func podIn(ns, labels string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p-" + ns + "\n  namespace: " + ns + "\n  labels:\n    " + labels +
		"\nspec:\n  containers:\n  - name: app\n    image: example.com/app:1\n"
}

// TestKubeconfigReadsTheLiveWebhook: the pod webhook's registration and the Namespaces' labels come
// from the cluster; the prefilter's own match condition tracks the SidecarSets and is not a reason,
// another one is said not to be evaluated.
func TestKubeconfigReadsTheLiveWebhook(t *testing.T) {
	wh := admissionregv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: "sidecarops"},
		Webhooks: []admissionregv1.MutatingWebhook{
			{Name: "msidecarset.sidecarops.io"},
			{
				Name: "mpod.sidecarops.io",
				NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "platform"}},
					{Key: "team", Operator: metav1.LabelSelectorOpExists},
				}},
				MatchConditions: []admissionregv1.MatchCondition{
					{Name: podwebhook.ConditionName, Expression: "false"},
					{Name: "not-batch", Expression: "!has(object.metadata.labels.batch)"},
				},
			},
		},
	}
	namespaces := map[string]corev1.Namespace{
		"shop": {ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"kubernetes.io/metadata.name": "shop", "team": "shop"}}},
		"lab":  {ObjectMeta: metav1.ObjectMeta{Name: "lab", Labels: map[string]string{"kubernetes.io/metadata.name": "lab"}}},
	}
	api := fakeAPI(t, func(r *http.Request) any {
		switch {
		case r.URL.Path == "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sidecarops":
			return wh
		case strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/"):
			ns, ok := namespaces[strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/")]
			if !ok {
				return notFound
			}
			ns.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}
			return ns
		}
		return nil
	})
	kubeconfig := writeFile(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: `+api.URL+`
- name: x
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: c
  context:
    cluster: c
    user: u
- name: x
  context:
    cluster: x
    user: u
users:
- name: u
  user:
    token: t
current-context: x
`)
	pods := writeFile(t, "pods.yaml", strings.Join([]string{podIn("shop", "app: web"), podIn("lab", "app: web"), podIn("platform", "app: web"), podIn("gone", "app: web")}, "---\n"))
	// --context picks the cluster, as kubectl's does; the current context names an address nobody serves.
	out, errOut, code := sidecarctl(t, "", "explain", "-f", "examples/logging/sidecarset.yaml", "-f", pods, "--kubeconfig", kubeconfig, "--context", "c")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "note: the pod webhook mpod.sidecarops.io of MutatingWebhookConfiguration sidecarops in the cluster of --kubeconfig "+kubeconfig+" --context c"+
		": not seen by the webhook: pods in namespaces kube-system, platform, in namespaces not matching team"+
		"; match condition not-batch (!has(object.metadata.labels.batch)) not evaluated offline: it may leave out pods said to be seen\n", errOut)
	assert.Equal(t, "Pod/p-shop (namespace shop):\n  logging-agent: matches\n"+
		"Pod/p-lab (namespace lab):\n  not seen by the webhook: namespace lab does not match its namespaceSelector (team)\n  logging-agent: matches, but the webhook does not see the pod\n"+
		"Pod/p-platform (namespace platform):\n  not seen by the webhook: namespace platform is excluded\n  logging-agent: matches, but the webhook does not see the pod\n"+
		"Pod/p-gone (namespace gone):\n  not seen by the webhook: namespace gone does not match its namespaceSelector (team)\n  logging-agent: matches, but the webhook does not see the pod\n", out)

	// No webhook of that name: said, not guessed.
	wh.Webhooks = wh.Webhooks[:1]
	_, errOut, code = sidecarctl(t, "", "explain", "-f", pods, "--kubeconfig", kubeconfig, "--context", "c")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "MutatingWebhookConfiguration sidecarops has no webhook mpod.sidecarops.io")
}

// notFound is the API server's answer about an object it does not hold.
var notFound = metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
	Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound}

// fakeAPI is an API server that answers each GET with what answer returns for it: an object, or a
// Status, with its code. nil is a request the test does not expect, which fails it.
func fakeAPI(t *testing.T, answer func(r *http.Request) any) *httptest.Server {
	t.Helper()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body := answer(r)
		if r.Method != http.MethodGet || body == nil {
			t.Errorf("unexpected request %s %s", r.Method, r.URL)
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if status, ok := body.(metav1.Status); ok {
			w.WriteHeader(int(status.Code))
		}
		assert.NoError(t, json.NewEncoder(w).Encode(body))
	}))
	t.Cleanup(api.Close)
	return api
}
