package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 31, "Why", one test each: what a CI gate must not let through.

// A typo in updateStrategy.type passes OpenKruise and rolls out to every pod at once: a warning,
// an error with --strict, with OpenKruise's RollingUpdate rules applied to the strategy it skips.
func TestStrategyTypoIsCaught(t *testing.T) {
	in := `apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata:
  name: proxy
spec:
  selector: {matchLabels: {app: web}}
  containers: [{name: proxy, image: envoy:1}]
  updateStrategy:
    type: RollingUpdates
    maxUnavailable: 150%
    partition: -1`
	want := []string{
		`<stdin>:9: document 1 (SidecarSet/proxy): spec.updateStrategy.type: Unsupported value: "RollingUpdates": supported values: "NotUpdate", "RollingUpdate": OpenKruise admits it and upgrades pods as with RollingUpdate, without validating the strategy [strict/update-strategy-type]`,
		`<stdin>:10: document 1 (SidecarSet/proxy): spec.updateStrategy.maxUnavailable: Invalid value: "150%": over 100%: every pod may be upgraded at once [strict/max-unavailable]`,
		`<stdin>:11: document 1 (SidecarSet/proxy): spec.updateStrategy.partition: Invalid value: -1: must be greater than or equal to 0 (as RollingUpdate would require) [strict/unchecked-strategy]`,
	}
	out, errOut, code := sidecarctlWithLines(t, in, "check", "-f", "-")
	assert.Equal(t, 0, code, "OpenKruise's verdict stands without --strict")
	assert.Equal(t, "1 SidecarSet(s) checked: no errors; 3 warning(s)\n", out)
	var warned []string
	for _, w := range want {
		warned = append(warned, "warning: "+w)
	}
	assert.Equal(t, warned, stderrLines(errOut))

	out, errOut, code = sidecarctlWithLines(t, in, "check", "-f", "-", "--strict")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, append(want, "3 error(s) in 1 of 1 SidecarSet(s)"), stderrLines(errOut))
}

// apps:kruise.io/v1alpha1 (copied from a public repository) is no SidecarSet a cluster serves: the
// API server refuses the file, strict or not.
func TestMalformedAPIVersionIsAnError(t *testing.T) {
	in := "apiVersion: apps:kruise.io/v1alpha1\nkind: SidecarSet\nmetadata: {name: proxy}\nspec:\n  selector: {matchLabels: {app: web}}\n  containers: [{name: proxy, image: envoy:1}]"
	for _, args := range [][]string{{"check", "-f", "-"}, {"check", "-f", "-", "--strict"}} {
		out, errOut, code := sidecarctlWithLines(t, in, args...)
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Equal(t, []string{
			`<stdin>:1: document 1 (SidecarSet/proxy): apiVersion: unsupported apiVersion "apps:kruise.io/v1alpha1" for kind SidecarSet (supported: apps.kruise.io/v1alpha1, apps.kruise.io/v1beta1)`,
			"1 error(s) in 1 of 1 SidecarSet(s)",
		}, stderrLines(errOut))
	}
}

// Five independent mistakes of one document, of every layer — a bad quantity, an unknown field,
// invalid enums and a strategy error — are five errors of one run, each on its line.
func TestEveryProblemInOneRun(t *testing.T) {
	in := `apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata:
  name: proxy
spec:
  selector: {matchLabels: {app: web}}
  containers:
  - name: proxy
    image: envoy:1
    imagee: envoy:2
    podInjectPolicy: Sideways
    shareVolumePolicy: {type: sometimes}
    resources: {limits: {cpu: lots}}
  updateStrategy:
    partition: -3`
	_, errOut, code := sidecarctlWithLines(t, in, "check", "-f", "-")
	assert.Equal(t, 1, code)
	assert.Equal(t, []string{
		"<stdin>:10: document 1 (SidecarSet/proxy): spec.containers[0].imagee: unknown field",
		"<stdin>:13: document 1 (SidecarSet/proxy): spec.containers[0].resources.limits.cpu: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
		"<stdin>:15: document 1 (SidecarSet/proxy): spec.updateStrategy.partition: Invalid value: -3: must be greater than or equal to 0",
		`<stdin>:11: document 1 (SidecarSet/proxy): spec.containers[0].podInjectPolicy: Invalid value: "Sideways": unsupported pod inject policy`,
		`<stdin>:12: document 1 (SidecarSet/proxy): spec.containers[0].shareVolumePolicy.type: Invalid value: "sometimes": unsupported share volume policy`,
		"5 error(s) in 1 of 1 SidecarSet(s)",
	}, stderrLines(errOut))
}

// A container without an image, two containers named main, imagePullPolicy Allways: the API
// server refuses such pods, so inject and check report the workload and the field (exit 1).
func TestWorkloadsTheAPIServerRefuses(t *testing.T) {
	in := yamlf(sidecarSetYAML, "agent", "agent") + "\n---\n" + `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: main
        image: web:1
        imagePullPolicy: Allways
      - name: main
      volumes: [{name: data, emptyDir: {}}]`
	// The Deployment's line n is the input's first+n-1: after the SidecarSet and the "---" line.
	first := strings.Count(yamlf(sidecarSetYAML, "agent", "agent"), "\n") + 3
	at := func(n int) string { return "<stdin>:" + strconv.Itoa(first+n-1) }
	want := []string{
		at(12) + `: document 2 (Deployment/web): spec.template.spec.containers[0].imagePullPolicy: Unsupported value: "Allways": supported values: "Always", "IfNotPresent", "Never"`,
		at(13) + `: document 2 (Deployment/web): spec.template.spec.containers[1].name: Duplicate value: "main"`,
		at(13) + `: document 2 (Deployment/web): spec.template.spec.containers[1].image: Required value`,
	}
	out, errOut, code := sidecarctlWithLines(t, in, "inject", "-f", "-")
	assert.Equal(t, 1, code)
	assert.NotContains(t, out, "Deployment", "a workload whose pods would be refused is left out")
	assert.Equal(t, want, stderrLines(errOut))

	_, errOut, code = sidecarctlWithLines(t, in, "check", "-f", "-")
	assert.Equal(t, 1, code)
	assert.Equal(t, append(want, "0 error(s) in 0 of 1 SidecarSet(s); 3 more elsewhere in the input"), stderrLines(errOut))
}

// check -o json and -o github on the file of docs/cli.md's CI step, and the exit statuses.
func TestCheckForCI(t *testing.T) {
	const file = "cmd/sidecarctl/testdata/ci/mistakes.yaml"
	out, errOut, code := sidecarctlWithLines(t, "", "check", "--strict", "-o", "github", "-f", file)
	assert.Equal(t, 1, code)
	assert.Empty(t, errOut)
	golden(t, "ci-github.txt", out)
	doc, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), "$ bin/sidecarctl check --strict -o github -f "+file+"\n"+out, "docs/cli.md shows this output")
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[:6] {
		assert.Regexp(t, `^::error file=cmd/sidecarctl/testdata/ci/mistakes\.yaml,line=\d+,title=sidecarctl [a-z/-]+::document \d `, l)
	}

	out, errOut, code = sidecarctlWithLines(t, "", "check", "-o", "json", "-f", file)
	assert.Equal(t, 1, code)
	assert.Empty(t, errOut)
	var report struct {
		Schema   string
		Strict   bool
		Findings []map[string]any
		Summary  map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(out), &report))
	assert.Equal(t, "sidecarctl.check/v1", report.Schema)
	require.Len(t, report.Findings, 6)
	assert.Equal(t, map[string]any{"file": file, "line": 13.0, "document": 1.0, "item": nil, "kind": "SidecarSet", "name": "proxy",
		"field": "spec.updateStrategy.type", "severity": "warning", "rule": "strict/update-strategy-type",
		"message": `Unsupported value: "RollingUpdates": supported values: "NotUpdate", "RollingUpdate": OpenKruise admits it and upgrades pods as with RollingUpdate, without validating the strategy`,
	}, report.Findings[0])
	assert.Equal(t, "error", report.Findings[2]["severity"])
	assert.Equal(t, "input", report.Findings[2]["rule"])
	assert.Equal(t, "pod", report.Findings[5]["rule"])
	assert.Equal(t, 4.0, report.Summary["errors"])
	assert.Equal(t, 2.0, report.Summary["warnings"])

	out, _, code = sidecarctlWithLines(t, "", "check", "--strict", "-o", "json", "-f", "examples/logging")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, `"findings": []`)

	_, errOut, code = sidecarctlWithLines(t, "", "check", "-o", "xml", "-f", file)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `-o "xml": unsupported output format (text, json or github)`)
	_, _, code = sidecarctlWithLines(t, "", "check", "--no-such-flag")
	assert.Equal(t, exitUsage, code)
	_, _, code = sidecarctlWithLines(t, "", "no-such-command")
	assert.Equal(t, exitUsage, code)
}

// What the API server takes is not refused: a startupProbe without successThreshold (defaulted to
// 1), an environment variable name of today's relaxed rule, a mount of a volumeClaimTemplate, a
// Job's OnFailure.
func TestWorkloadsTheAPIServerTakes(t *testing.T) {
	in := `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  selector: {matchLabels: {app: db}}
  serviceName: db
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - name: db
        image: db:1
        env: [{name: app.config-path, value: /etc/db}]
        startupProbe: {exec: {command: [ready]}}
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  template:
    spec:
      restartPolicy: OnFailure
      containers: [{name: once, image: once:1}]`
	out, errOut, code := sidecarctl(t, in, "check", "-f", "-", "--strict")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "0 SidecarSet(s) checked: no errors\n", out)
	_, errOut, code = sidecarctl(t, in, "inject", "-f", "-")
	assert.Equal(t, 0, code, errOut)
}

// Issue 36 item 7: a key the whitelist refuses is reported in the run that reports the SidecarSet's
// other errors, not in a second run once they are fixed — for a SidecarSet that decodes and one
// that does not (a bad quantity). The webhook would evaluate the whitelist only once the rest
// passes; OpenKruise's checks it among the single-object rules, and a CI run wants both at once.
func TestWhitelistRefusalInTheFirstRun(t *testing.T) {
	const refused = `spec.patchPodMetadata[0].annotations[not.allowed/x]: Forbidden: sidecarSet patch metadata annotation(not.allowed/x) is not allowed`
	for _, tc := range []struct{ name, mistake, want string }{
		{"a rule of OpenKruise's", "podInjectPolicy: Sideways", `<stdin>:9: document 1 (SidecarSet/metrics): spec.containers[0].podInjectPolicy: Invalid value: "Sideways": unsupported pod inject policy`},
		{"a value that does not decode", "resources: {limits: {cpu: lots}}", `<stdin>:9: document 1 (SidecarSet/metrics): spec.containers[0].resources.limits.cpu: quantities must match`},
		{"nothing else", "podInjectPolicy: AfterAppContainer", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := `apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata: {name: metrics}
spec:
  selector: {matchLabels: {app: web}}
  containers:
  - name: exporter
    image: exporter:1
    ` + tc.mistake + `
  patchPodMetadata:
  - annotations: {not.allowed/x: "1"}
    patchPolicy: Retain`
			_, errOut, code := sidecarctlWithLines(t, in, "check", "-f", "-", "--bundle", "examples/whitelist-bundle")
			assert.Equal(t, 1, code)
			lines := stderrLines(errOut)
			want := 2
			if tc.want != "" {
				want = 3
				assert.True(t, strings.HasPrefix(lines[0], tc.want), lines[0])
			}
			require.Len(t, lines, want, errOut)
			assert.Contains(t, lines[want-2], "<stdin>:11: document 1 (SidecarSet/metrics): "+refused)
			assert.Equal(t, strconv.Itoa(want-1)+" error(s) in 1 of 1 SidecarSet(s)", lines[want-1])
		})
	}
}
