package manifests

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/testing/render"
)

// notes is what `helm install` prints after installing the chart with the --set arguments given.
func notes(t *testing.T, sets ...string) string {
	t.Helper()
	args := []string{"install", "sidecarops", chartDir, "--namespace", namespace, "--dry-run=client"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := render.Helm(t.TempDir(), args...)
	require.NoError(t, err, "%s", out)
	_, text, found := strings.Cut(string(out), "\nNOTES:\n")
	require.True(t, found, "%s", out)
	return text
}

// A release installed to take over from OpenKruise says what is left to do, with the section of
// docs/migration.md its path goes on with; an install of its own says nothing of it.
func TestChartNotesForAMigration(t *testing.T) {
	doc, err := os.ReadFile("../../docs/migration.md")
	require.NoError(t, err)
	anchors := headingAnchors(doc)
	const guide = "https://github.com/sidecarops/sidecarops/blob/main/docs/migration.md#"
	for _, tc := range []struct {
		name, anchor string
		sets         []string
		want, not    []string
	}{
		{"path A", "path-a-stop-openkruise", []string{"revisionNamespace=kruise-system"},
			[]string{"from step 6", "stop OpenKruise now", "a plain `helm uninstall` deletes the SidecarSet CRD", "sidecarctl migrate check",
				`"Path A"`, "unpause", "the SidecarSet CRD (apps.kruise.io"},
			[]string{"path-b", "fence"}},
		{"path B", "path-b-keep-openkruise-for-its-other-workloads", []string{"revisionNamespace=kruise-system", "openkruise.fence.enabled=true"},
			[]string{"\nfrom step 6", "sidecarctl migrate check", "unpause", "the SidecarSet CRD stays OpenKruise's"},
			[]string{"path-a", "Path A", "the SidecarSet CRD (apps.kruise.io"}},
		{"path B, history in the release's namespace", "path-b-keep-openkruise-for-its-other-workloads", []string{"openkruise.fence.enabled=true"},
			[]string{"sidecarctl migrate check"}, []string{"path-a"}},
		{"no migration", "", nil, nil, []string{"migration.md#", "migrate check", "OpenKruise now"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := notes(t, tc.sets...)
			if tc.anchor != "" {
				assert.Contains(t, text, guide+tc.anchor)
				assert.True(t, anchors[tc.anchor], "docs/migration.md has no heading for #%s", tc.anchor)
			}
			for _, s := range tc.want {
				assert.Contains(t, text, s)
			}
			for _, s := range tc.not {
				assert.NotContains(t, text, s)
			}
		})
	}
}
