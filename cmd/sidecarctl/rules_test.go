package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
	"github.com/sidecarops/sidecarops/policies/strict"
)

// rulesInput holds one finding of each kind a rule can silence, and one a cluster refuses: a
// strategy typo (strict/update-strategy-type), a Deployment whose volume config shadows the one the
// sidecar mounts (strict/shadowed-volume), two kinds sidecarctl does not read (kind-not-read), and a
// Deployment the API server refuses (pod). disableOnSidecarSet and disableOnWorkload are the
// disable annotations of the SidecarSet and of the shadowing Deployment.
func rulesInput(disableOnSidecarSet, disableOnWorkload string) string {
	annotate := func(value string) string {
		if value == "" {
			return "{}"
		}
		return "{" + findings.DisableAnnotation + ": " + `"` + value + `"}`
	}
	return `apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata:
  name: agent
  annotations: ` + annotate(disableOnSidecarSet) + `
spec:
  selector: {matchLabels: {app: web}}
  updateStrategy: {type: RollingUpdates}
  containers:
  - name: agent
    image: agent:1
    volumeMounts: [{name: config, mountPath: /etc/agent}]
  volumes: [{name: config, configMap: {name: agent-config}}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations: ` + annotate(disableOnWorkload) + `
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: web:1}]
      volumes: [{name: config, emptyDir: {}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: broken}
spec:
  selector: {matchLabels: {app: broken}}
  template:
    metadata: {labels: {app: broken}}
    spec:
      containers: [{name: broken, image: broken:1, imagePullPolicy: Allways}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
---
apiVersion: v1
kind: Service
metadata: {name: other}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}`
}

// shippedRules are check's rules with those of the shipped strict policy.
func shippedRules(t *testing.T) findings.RuleSet {
	t.Helper()
	b, err := strict.Bundle()
	require.NoError(t, err)
	return findings.NewRuleSet(strict.Rules(b))
}

// Issue 36 item 7: per-rule control. Warnings and strict findings can be silenced by --disable or
// by the annotation on either object a finding is about; what a cluster refuses cannot. The kinds
// not read are one finding about no file, after those about files.
func TestRuleControl(t *testing.T) {
	const (
		typo     = `<stdin>:8: document 1 (SidecarSet/agent): spec.updateStrategy.type: Unsupported value: "RollingUpdates": supported values: "NotUpdate", "RollingUpdate": OpenKruise admits it and upgrades pods as with RollingUpdate, without validating the strategy [strict/update-strategy-type]`
		shadow   = `<stdin>:26: document 2 (Deployment/web): spec.template.spec.volumes[0]: volume "config" shadows the volume of the same name of SidecarSet/agent, which its container agent mounts: the pod's volume wins at injection, so the sidecar mounts this one instead of its own (rename one of them, or define them alike) [strict/shadowed-volume]`
		refused  = `<stdin>:36: document 3 (Deployment/broken): spec.template.spec.containers[0].imagePullPolicy: Unsupported value: "Allways": supported values: "Always", "IfNotPresent", "Never"`
		notRead  = `warning: 3 document(s) of kinds sidecarctl does not read, ignored: networking.k8s.io/v1 Ingress (1), v1 Service (2)`
		onlyPods = "0 error(s) in 0 of 1 SidecarSet(s); 1 more elsewhere in the input"
	)
	for _, tc := range []struct {
		name       string
		ssNote, wl string
		args       []string
		want       []string
	}{
		{"every finding, in input order, the refusal among them", "", "", nil,
			[]string{"warning: " + typo, "warning: " + shadow, refused, notRead, onlyPods + "; 3 warning(s)"}},
		{"--strict makes the strict findings errors", "", "", []string{"--strict"},
			[]string{typo, shadow, refused, notRead, "1 error(s) in 1 of 1 SidecarSet(s); 2 more elsewhere in the input; 1 warning(s)"}},
		{"--disable, by name with or without strict/, silences a rule", "", "",
			[]string{"--strict", "--disable", "update-strategy-type", "--disable", "strict/shadowed-volume", "--disable", "kind-not-read"},
			[]string{refused, onlyPods + "; 3 silenced"}},
		{"the annotation on the SidecarSet silences a finding about its volume on the workload", "strict/shadowed-volume", "", []string{"--strict"},
			[]string{typo, refused, notRead, "1 error(s) in 1 of 1 SidecarSet(s); 1 more elsewhere in the input; 1 warning(s); 1 silenced"}},
		{"the annotation on the workload silences it too, and names what it cannot silence", "", "pod, shadowed-volume, no-such-rule", []string{"--strict"},
			[]string{
				typo,
				`warning: <stdin>:19: document 2 (Deployment/web): metadata.annotations[sidecarctl.sidecarops.io/disable]: pod: what a cluster refuses cannot be disabled`,
				`warning: <stdin>:19: document 2 (Deployment/web): metadata.annotations[sidecarctl.sidecarops.io/disable]: "no-such-rule": no such rule, nothing silenced (the rules: ` + shippedRules(t).Known() + `)`,
				refused, notRead, "1 error(s) in 1 of 1 SidecarSet(s); 1 more elsewhere in the input; 3 warning(s); 1 silenced",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := sidecarctlWithLines(t, rulesInput(tc.ssNote, tc.wl), append([]string{"check", "-f", "-"}, tc.args...)...)
			assert.Equal(t, 1, code, "the refused Deployment fails the run whatever is silenced")
			assert.Equal(t, tc.want, stderrLines(errOut))
		})
	}

	// The same in JSON: the silenced count, and the kinds not read as one finding of no file.
	out, _, code := sidecarctlWithLines(t, rulesInput("", ""), "check", "-f", "-", "-o", "json", "--disable", "update-strategy-type")
	assert.Equal(t, 1, code)
	var report findings.Report
	require.NoError(t, json.Unmarshal([]byte(out), &report))
	assert.Equal(t, 1, report.Summary.Silenced)
	require.Len(t, report.Findings, 3)
	assert.Equal(t, "strict/shadowed-volume", report.Findings[0].Rule)
	assert.Equal(t, "pod", report.Findings[1].Rule)
	assert.Equal(t, findings.JSONFinding{Severity: "warning", Rule: "kind-not-read", Message: strings.TrimPrefix(notRead, "warning: ")}, report.Findings[2])

	// -o github: one annotation for the kinds not read, on the run rather than a file.
	out, _, _ = sidecarctlWithLines(t, rulesInput("", ""), "check", "-f", "-", "-o", "github")
	assert.Contains(t, out, "::warning title=sidecarctl kind-not-read::3 document(s) of kinds sidecarctl does not read, ignored: networking.k8s.io/v1 Ingress (1), v1 Service (2)\n")
	assert.Equal(t, 1, strings.Count(out, "kind-not-read"))
}

// What a cluster refuses cannot be disabled, and a rule that does not exist is a usage error: both
// name the rules that can be given.
func TestRuleFlagsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--disable", "pod"}, "--disable pod: what a cluster refuses cannot be disabled (the rules that can: " + shippedRules(t).Silenceable() + ")"},
		{[]string{"--disable", "sidecarset"}, "--disable sidecarset: what a cluster refuses cannot be disabled"},
		{[]string{"--disable", "selector-matches-nothin"}, `--disable "selector-matches-nothin": no such rule (the rules: ` + shippedRules(t).Known() + ")"},
		{[]string{"--enable", "nope"}, `--enable "nope": no such rule`},
		{[]string{"--enable", "selector-matches-nothing", "--disable", "strict/selector-matches-nothing"}, "--enable strict/selector-matches-nothing and --disable strict/selector-matches-nothing: give one"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := sidecarctlWithLines(t, "", append([]string{"check", "-f", "examples/logging"}, tc.args...)...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tc.want)
		})
	}
	assert.Contains(t, shippedRules(t).Known(), "strict/selector-matches-nothing")
	assert.NotContains(t, strings.Split(shippedRules(t).Silenceable(), ", "), "pod")
	assert.Contains(t, shippedRules(t).Silenceable(), "input", "its warnings, never its errors")
}

// strict/selector-matches-nothing is reported only with --enable, and judges a SidecarSet only on the
// pods of the namespaces it selects: one unrelated Deployment is no reason to flag every SidecarSet.
func TestSelectorMatchesNothing(t *testing.T) {
	sidecarSets := `apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata: {name: everywhere}
spec:
  selector: {matchLabels: {app: web}}
  containers: [{name: a, image: a:1}]
---
apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata: {name: payments}
spec:
  namespace: payments
  selector: {matchLabels: {app: pay}}
  containers: [{name: p, image: p:1}]
---
apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata: {name: labelled}
spec:
  namespaceSelector: {matchLabels: {team: shop}}
  selector: {matchLabels: {app: cart}}
  containers: [{name: c, image: c:1}]
---
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: shop}}
`
	pod := func(ns, app string) string {
		return "---\napiVersion: v1\nkind: Pod\nmetadata: {name: " + app + ", namespace: " + ns + ", labels: {app: " + app + "}}\nspec: {containers: [{name: c, image: c:1}]}\n"
	}
	matchesNothing := func(name string) string {
		return "(SidecarSet/" + name + "): spec.selector:"
	}
	for _, tc := range []struct {
		name   string
		pods   string
		enable bool
		fired  []string
	}{
		{"off by default, even where it would fire", pod("shop", "db"), false, nil},
		{"an unrelated pod in another namespace: only the SidecarSet that selects every namespace is judged", pod("tools", "db"), true, []string{"everywhere"}},
		{"each judged on the pods of its namespaces, by name and by the Namespace's labels", pod("shop", "web") + pod("payments", "paymnt") + pod("shop", "kart"), true, []string{"payments", "labelled"}},
		{"nothing to say when each matches", pod("shop", "web") + pod("payments", "pay") + pod("shop", "cart"), true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"check", "-f", "-", "--strict"}
			if tc.enable {
				args = append(args, "--enable", "selector-matches-nothing")
			}
			_, errOut, code := sidecarctl(t, sidecarSets+tc.pods, args...)
			var fired []string
			for _, name := range []string{"everywhere", "payments", "labelled"} {
				if strings.Contains(errOut, matchesNothing(name)) {
					fired = append(fired, name)
				}
			}
			assert.Equal(t, tc.fired, fired, errOut)
			assert.Equal(t, min(len(tc.fired), 1), code)
		})
	}
}

// A workload volume of the name of a volume an injected sidecar mounts wins at injection (decision
// Q4): the sidecar mounts it instead of its own. Not when the sidecar does not mount it (it is not
// injected), when both define it alike (shared on purpose), or when the SidecarSet is not injected.
func TestShadowedVolume(t *testing.T) {
	sidecarSet := `apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: web}}
  containers:
  - name: agent
    image: agent:1
    volumeMounts: [{name: config, mountPath: /etc/agent}, {name: scratch, mountPath: /tmp}]
  volumes:
  - {name: config, configMap: {name: agent-config}}
  - {name: scratch, emptyDir: {}}
  - {name: unused, emptyDir: {}}
`
	pod := func(app, volumes string) string {
		return "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: " + app + "}}\nspec:\n  containers: [{name: c, image: c:1}]\n  volumes: " + volumes + "\n"
	}
	for _, tc := range []struct {
		name, pod string
		shadowed  []string
	}{
		{"another definition under the name the sidecar mounts", pod("web", "[{name: config, emptyDir: {}}]"), []string{"config"}},
		{"the same definition, defaulted alike: shared", pod("web", "[{name: config, configMap: {name: agent-config, defaultMode: 420}}, {name: scratch, emptyDir: {}}]"), nil},
		{"a volume no sidecar mounts is not injected", pod("web", "[{name: unused, hostPath: {path: /x}}]"), nil},
		{"a pod the SidecarSet does not select", pod("db", "[{name: config, emptyDir: {}}]"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := sidecarctl(t, sidecarSet+tc.pod, "check", "-f", "-", "-o", "json")
			assert.Equal(t, 0, code, errOut)
			var report findings.Report
			require.NoError(t, json.Unmarshal([]byte(out), &report))
			var shadowed []string
			for _, f := range report.Findings {
				if f.Rule == findings.RuleShadowedVolume {
					shadowed = append(shadowed, strings.Split(f.Message, `"`)[1])
					assert.Equal(t, "spec.volumes[0]", f.Field, "a Pod's volumes are its own")
				}
			}
			assert.Equal(t, tc.shadowed, shadowed)
		})
	}
}
