package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
	"github.com/sidecarops/sidecarops/internal/testing/testfiles"
)

// policyBundle is the SidecarSet policies of the tests, relative to the repository root.
const policyBundle = "cmd/sidecarctl/testdata/policies"

// governed is a SidecarSet of every namespace whose privileged sidecar fails the restricted level
// of Namespace bank, with maxUnavailable over 100%; a Deployment of 3 replicas in shop, a namespace
// no document describes; and a Pod in bank that passes the restricted level until injected.
const governed = `apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata:
  name: mesh
spec:
  selector: {matchLabels: {app: web}}
  updateStrategy: {maxUnavailable: 150%}
  containers:
  - name: proxy
    image: docker.io/envoy:1
    securityContext: {privileged: true}
---
apiVersion: v1
kind: Namespace
metadata:
  name: bank
  labels: {pod-security.kubernetes.io/enforce: restricted}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: web:1}]
---
apiVersion: v1
kind: Pod
metadata: {name: teller, namespace: bank, labels: {app: web}}
spec:
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: teller
    image: teller:1
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`

// checkJSON runs check -o json and returns its report and exit status.
func checkJSON(t *testing.T, stdin string, args ...string) (findings.Report, int) {
	t.Helper()
	out, errOut, code := sidecarctl(t, stdin, append([]string{"check", "-o", "json"}, args...)...)
	var report findings.Report
	require.NoError(t, json.Unmarshal([]byte(out), &report), errOut)
	return report, code
}

// ruled are the findings' rule and severity, in order (a SidecarSet's by line: those about no field
// first), with the kind of object each is about.
func ruled(report findings.Report) []string {
	var out []string
	for _, f := range report.Findings {
		out = append(out, f.Kind+" "+f.Rule+" "+f.Severity)
	}
	return out
}

// Issue 37 item 1: check asks the administrators' SidecarSet policies as admission would. Deny
// findings are errors nothing silences; warn findings and Pod Security's warnings are warnings,
// errors with --strict; dryrun findings are notes that never fail the run. The strict policy is
// among the policies, its rules named as before.
func TestCheckAsksTheSidecarSetPolicies(t *testing.T) {
	const (
		owner  = "SidecarSet policy/platform/owner error"
		radius = "SidecarSet policy/platform/blast-radius warning"
		image  = "SidecarSet policy/platform notice"
		strict = "SidecarSet strict/max-unavailable warning"
		ssPSA  = "SidecarSet pod-security warning"
		podPSA = "Pod pod-security warning"
	)
	for _, tc := range []struct {
		name string
		args []string
		want []string
		code int
	}{
		{"a developer: refused, with every warning and the note", []string{"--as", "alice", "--as-group", "dev"},
			[]string{radius, image, ssPSA, owner, strict, podPSA}, 1},
		{"the platform team: admitted with warnings", []string{"--as", "bob", "--as-group", "platform"},
			[]string{radius, image, ssPSA, strict, podPSA}, 0},
		{"--strict: warnings are errors, the note is not", []string{"--as", "bob", "--as-group", "platform", "--strict"},
			[]string{"SidecarSet policy/platform/blast-radius error", image, "SidecarSet pod-security error",
				"SidecarSet strict/max-unavailable error", "Pod pod-security error"}, 1},
		{"--disable silences warnings and notes, never a denial", []string{"--as", "alice", "--disable", "policy/platform/owner",
			"--disable", "policy/platform/blast-radius", "--disable", "policy/platform", "--disable", "pod-security", "--disable", "max-unavailable"},
			[]string{owner}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			report, code := checkJSON(t, governed, append([]string{"-f", "-", "--bundle", policyBundle}, tc.args...)...)
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.want, ruled(report))
		})
	}

	report, _ := checkJSON(t, governed, "-f", "-", "--bundle", policyBundle, "--as", "alice")
	byRule := map[string]findings.JSONFinding{}
	for _, f := range report.Findings {
		byRule[f.Kind+" "+f.Rule] = f
	}
	assert.Equal(t, findings.JSONFinding{File: "<stdin>", Line: 5, Document: 1, Kind: "SidecarSet", Name: "mesh", Field: "spec.namespaceSelector",
		Severity: "error", Rule: "policy/platform/owner", Message: "alice may not inject into every namespace: only group platform may"},
		byRule["SidecarSet policy/platform/owner"], "at the field the policy names, or the nearest one written")
	assert.Equal(t, "selects 4 existing pods, more than 2: roll it out in steps", byRule["SidecarSet policy/platform/blast-radius"].Message,
		"the Deployment's 3 replicas and the Pod")
	assert.Contains(t, byRule["SidecarSet pod-security"].Message, `its sidecars violate PodSecurity "restricted:latest" of namespace bank`)
	assert.Contains(t, byRule["Pod pod-security"].Message, `injecting SidecarSet mesh makes the pod violate PodSecurity "restricted:latest": privileged`)
	assert.Equal(t, findings.Summary{Errors: 1, Warnings: 4, Notices: 1, SidecarSets: 1, Workloads: 2,
		Text: "1 error(s) in 1 of 1 SidecarSet(s); 4 warning(s); 1 note(s)"}, report.Summary)

	// The text and the workflow commands name every policy's rule.
	_, errOut, _ := sidecarctlWithLines(t, governed, "check", "-f", "-", "--bundle", policyBundle, "--as", "alice")
	assert.Contains(t, errOut, "<stdin>:5: document 1 (SidecarSet/mesh): spec.namespaceSelector: alice may not inject into every namespace: only group platform may [policy/platform/owner]\n")
	assert.Contains(t, errOut, "\nnote: <stdin>:1: document 1 (SidecarSet/mesh): would refuse image docker.io/envoy:1: not from registry.example.com [policy/platform]\n")
	out, _, _ := sidecarctlWithLines(t, governed, "check", "-f", "-", "--bundle", policyBundle, "--as", "alice", "-o", "github")
	assert.Contains(t, out, "::notice file=<stdin>,line=1,title=sidecarctl policy/platform::document 1 (SidecarSet/mesh): would refuse image")
	assert.Contains(t, out, "::warning file=<stdin>,line=7,title=sidecarctl strict/max-unavailable::")

	// The annotation silences a policy's warnings too, and no denial.
	annotated := strings.Replace(governed, "  name: mesh\n", "  name: mesh\n  annotations: {"+findings.DisableAnnotation+": \"policy/platform/owner,policy/platform/blast-radius\"}\n", 1)
	report, code := checkJSON(t, annotated, "-f", "-", "--bundle", policyBundle, "--as", "alice")
	assert.Equal(t, 1, code)
	assert.Equal(t, []string{image, ssPSA, owner, strict, podPSA}, ruled(report))
}

// Without --bundle, the strict policy alone speaks; a --bundle providing its root replaces it: its
// actions and parameters, its rules the only strict ones known, a denial among them a refusal.
func TestStrictPolicyReplacedByABundle(t *testing.T) {
	const ss = `apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata: {name: mesh}
spec:
  selector: {matchLabels: {app: web}}
  updateStrategy: {type: RollingUpdates, maxUnavailable: 60%}
  containers: [{name: proxy, image: envoy:1}]
`
	report, code := checkJSON(t, ss, "-f", "-")
	assert.Equal(t, 0, code)
	assert.Equal(t, []string{"SidecarSet strict/update-strategy-type warning"}, ruled(report), "60% is within the shipped 100%")

	rego, err := os.ReadFile("../../policies/strict/strict.rego")
	require.NoError(t, err)
	dir := t.TempDir()
	for name, content := range map[string]string{
		".manifest":   `{"roots": ["sidecarsets/strict"]}`,
		"strict.rego": string(rego),
		"sidecarsets/strict/data.json": `{"actions": {"update-strategy-type": "deny", "max-unavailable": "warn"},
			"maxUnavailablePercent": 50}`,
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	report, code = checkJSON(t, ss, "-f", "-", "--bundle", dir, "--disable", "update-strategy-type")
	assert.Equal(t, 1, code, "the administrators' copy denies the typo: --disable cannot silence it")
	assert.Equal(t, []string{"SidecarSet strict/update-strategy-type error", "SidecarSet strict/max-unavailable warning"}, ruled(report))
	assert.Equal(t, `Invalid value: "60%": over 50%: 60% of the pods may be upgraded at once`, report.Findings[1].Message)

	_, errOut, code := sidecarctl(t, ss, "check", "-f", "-", "--bundle", dir, "--disable", "ignored-strategy-field")
	assert.Equal(t, exitUsage, code, "a rule of the shipped policy that the copy does not have")
	assert.Contains(t, errOut, `--disable "ignored-strategy-field": no such rule (the rules: `)
}

// --as and --as-group are the requester as the API server makes an impersonated one.
func TestRequesterFlags(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags requesterFlags
		want  authenticationv1.UserInfo
		fail  string
	}{
		{"no --as: nobody", requesterFlags{}, authenticationv1.UserInfo{}, ""},
		{"a user is authenticated", requesterFlags{as: "alice"}, authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}, ""},
		{"with her groups", requesterFlags{as: "alice", groups: []string{"dev", "ops"}},
			authenticationv1.UserInfo{Username: "alice", Groups: []string{"dev", "ops", "system:authenticated"}}, ""},
		{"said unauthenticated", requesterFlags{as: "alice", groups: []string{"system:unauthenticated"}},
			authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:unauthenticated"}}, ""},
		{"the anonymous user", requesterFlags{as: "system:anonymous"},
			authenticationv1.UserInfo{Username: "system:anonymous", Groups: []string{"system:unauthenticated"}}, ""},
		{"groups of nobody", requesterFlags{groups: []string{"dev"}}, authenticationv1.UserInfo{}, "--as-group dev without --as"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.flags.userInfo()
			if tc.fail != "" {
				require.ErrorAs(t, err, new(usageError))
				assert.Contains(t, err.Error(), tc.fail)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestCheckReadsTheClusterForThePolicies: with --kubeconfig the impact view counts the cluster's
// unfinished pods (listed page by page) beside the input's, over its Namespaces, of which the
// input's win; a SidecarSet the cluster holds is an UPDATE of it, one it lacks a CREATE.
func TestCheckReadsTheClusterForThePolicies(t *testing.T) {
	stored := v1beta1.SidecarSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1beta1", Kind: "SidecarSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "mesh"},
		Spec:       v1beta1.SidecarSetSpec{Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "docker.io/envoy:0"}}}},
	}
	sidecarSets := []any{stored}
	namespace := func(name string, labels map[string]string) corev1.Namespace {
		return corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	namespaces := []corev1.Namespace{
		namespace("shop", map[string]string{"team": "shop"}),
		// The input's bank enforces restricted; the cluster's, about to be relabelled, nothing.
		namespace("bank", nil),
	}
	pod := func(ns, name, app string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}}, Status: corev1.PodStatus{Phase: phase}}
	}
	pages := map[string]corev1.PodList{
		"":       {ListMeta: metav1.ListMeta{Continue: "page-2"}, Items: []corev1.Pod{pod("shop", "a", "web", corev1.PodRunning), pod("shop", "b", "db", corev1.PodRunning)}},
		"page-2": {Items: []corev1.Pod{pod("shop", "c", "web", corev1.PodPending), pod("shop", "d", "web", corev1.PodSucceeded)}},
	}
	api := fakeAPI(t, func(r *http.Request) any {
		switch r.URL.Path {
		case "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sidecarops":
			return map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
				"metadata": map[string]any{"name": "sidecarops"}, "webhooks": []any{map[string]any{"name": "mpod.sidecarops.io"}}}
		case "/api/v1/namespaces":
			return corev1.NamespaceList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NamespaceList"}, Items: namespaces}
		case "/api/v1/namespaces/shop":
			return namespaces[0]
		case "/api/v1/pods":
			assert.Equal(t, "500", r.URL.Query().Get("limit"))
			page := pages[r.URL.Query().Get("continue")]
			page.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}
			return page
		case "/apis/apps.kruise.io/v1beta1/sidecarsets":
			if sidecarSets == nil {
				return notFound
			}
			return map[string]any{"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSetList", "metadata": map[string]any{}, "items": sidecarSets}
		}
		return nil
	})
	kubeconfig := writeFile(t, "kubeconfig", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "+api.URL+"}\n"+
		"contexts:\n- name: c\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: t}\ncurrent-context: c\n")

	report, code := checkJSON(t, governed, "-f", "-", "--bundle", policyBundle, "--as", "bob", "--as-group", "platform", "--kubeconfig", kubeconfig)
	assert.Equal(t, 0, code)
	messages := map[string]string{}
	for _, f := range report.Findings {
		messages[f.Kind+" "+f.Rule] = f.Message
	}
	assert.Equal(t, "selects 6 existing pods, more than 2: roll it out in steps", messages["SidecarSet policy/platform/blast-radius"],
		"the input's 4 and the cluster's 2 unfinished web pods")
	assert.Equal(t, "changes the image of proxy from docker.io/envoy:0", messages["SidecarSet policy/platform/image-change"])
	assert.Contains(t, messages["SidecarSet pod-security"], "of namespace bank", "the input's Namespace wins")

	sidecarSets = nil // a cluster without the SidecarSet kind: a CREATE
	report, _ = checkJSON(t, governed, "-f", "-", "--bundle", policyBundle, "--as", "bob", "--as-group", "platform", "--kubeconfig", kubeconfig)
	for _, f := range report.Findings {
		assert.NotEqual(t, "policy/platform/image-change", f.Rule)
	}
}

// A bundle whose root covers all of sidecarsets replaces the built-in strict policy though it holds
// none: check says the strict findings are off rather than dropping them silently.
func TestCheckSaysWhenABundleTurnsTheStrictPolicyOff(t *testing.T) {
	dir := t.TempDir()
	testfiles.Write(t, dir, map[string]string{
		".manifest":            `{"roots": ["sidecarsets"]}`,
		"sidecarsets/p/p.rego": "package sidecarsets.p\n\nwarn contains \"seen\" if input.sidecarSet\n",
	})
	report, _ := checkJSON(t, governed, "-f", "-", "--bundle", dir, "--as", "bob", "--as-group", "platform")
	var said []string
	for _, f := range report.Findings {
		if f.Rule == findings.RuleInput {
			said = append(said, f.File+": "+f.Message)
		}
	}
	assert.Equal(t, []string{dir + ": its roots cover sidecarsets/strict but it holds no strict policy there: the built-in strict findings are off (give each of its SidecarSet policies a root of its own, sidecarsets/NAME, to keep them)"}, said)
	assert.NotContains(t, ruled(report), "SidecarSet strict/max-unavailable warning", "the shipped policy is replaced")
	assert.Contains(t, ruled(report), "SidecarSet policy/p warning", "the bundle's own policy runs")
}
