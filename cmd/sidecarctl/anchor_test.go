package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
	"github.com/sidecarops/sidecarops/internal/testing/render"
)

// Issue 36 item 7: `helm template … | sidecarctl check -f -` reports each finding in the chart's
// template it came from, at the template's line, the document numbered among that template's —
// from helm's "# Source:" comments, in every output.
func TestHelmTemplateIsAnchoredToItsTemplates(t *testing.T) {
	const chart = "testdata/helm-chart"
	rendered, err := render.Helm(t.TempDir(), "template", "r", chart)
	require.NoError(t, err)
	require.Contains(t, string(rendered), "# Source: helm-chart/templates/web.yaml", "what helm writes, which the anchors read")

	out, _, code := sidecarctlWithLines(t, string(rendered), "check", "-f", "-", "-o", "json", "--stdin-filename", "ignored.yaml")
	assert.Equal(t, 1, code)
	var report findings.Report
	require.NoError(t, json.Unmarshal([]byte(out), &report))
	want := map[string]struct {
		file string
		doc  int
		text string // what the template's line holds
	}{
		"pod":                         {"helm-chart/templates/web.yaml", 2, "imagePullPolicy: Allways"},
		"strict/update-strategy-type": {"helm-chart/templates/sidecarset.yaml", 1, "type: RollingUpdates"},
	}
	seen := 0
	for _, f := range report.Findings {
		w, ok := want[f.Rule]
		if !ok {
			continue
		}
		seen++
		assert.Equal(t, w.file, f.File)
		assert.Equal(t, w.doc, f.Document)
		template, err := os.ReadFile(filepath.Join(chart, strings.TrimPrefix(f.File, "helm-chart/")))
		require.NoError(t, err)
		lines := strings.Split(string(template), "\n")
		require.Less(t, f.Line-1, len(lines), f)
		assert.Equal(t, w.text, strings.TrimSpace(lines[f.Line-1]), "line %d of %s", f.Line, f.File)
	}
	assert.Equal(t, len(want), seen, out)

	// The same anchors in the text and github outputs.
	_, errOut, _ := sidecarctlWithLines(t, string(rendered), "check", "-f", "-")
	assert.Contains(t, errOut, "helm-chart/templates/web.yaml:20: document 2 (Deployment/web): spec.template.spec.containers[0].imagePullPolicy")
	out, _, _ = sidecarctlWithLines(t, string(rendered), "check", "-f", "-", "-o", "github")
	assert.Contains(t, out, "::error file=helm-chart/templates/web.yaml,line=20,title=sidecarctl pod::document 2 (Deployment/web)")
}

// Without Source comments, --stdin-filename names standard input, in every command that reads it;
// without it, standard input is "<stdin>". A flag for input not read is a usage error.
func TestStdinFilename(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, image: c, imagee: c}]}\n"
	for _, args := range [][]string{{"check"}, {"inject"}, {"explain"}, {"convert"}, {"compile", "-o", filepath.Join(t.TempDir(), "b.tar.gz")}} {
		_, errOut, code := sidecarctlWithLines(t, pod, append(args, "-f", "-", "--stdin-filename", "deploy/pod.yaml")...)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "deploy/pod.yaml:4: document 1 (Pod/x): spec.containers[0].imagee: unknown field", args)
	}
	_, errOut, _ := sidecarctlWithLines(t, pod, "check", "-f", "-")
	assert.Contains(t, errOut, "<stdin>:4: document 1 (Pod/x)")

	_, errOut, code := sidecarctlWithLines(t, "", "check", "-f", "examples/logging", "--stdin-filename", "x.yaml")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--stdin-filename x.yaml: standard input is not read (no -f -)")
}
