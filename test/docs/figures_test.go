package docs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/testing/doctable"
)

// Performance figures have one home, docs/benchmarks.md, with the command that measures each: a
// figure copied elsewhere goes stale when the code moves. The rule for what counts as a figure, and
// for the limits and settings that do not, is doctable.Figures'.
func TestFiguresOnlyInBenchmarks(t *testing.T) {
	root, err := doctable.Root()
	require.NoError(t, err)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files := []string{filepath.Join(root, "README.md")}
	for _, d := range docs {
		if filepath.Base(d) != "benchmarks.md" {
			files = append(files, d)
		}
	}
	require.Greater(t, len(files), 5, "README.md and docs/*.md: the test reads too few files")
	for _, f := range files {
		markdown, err := os.ReadFile(f)
		require.NoError(t, err)
		rel, err := filepath.Rel(root, f)
		require.NoError(t, err)
		for _, fig := range doctable.Figures(markdown) {
			t.Errorf("%s:%d states a performance figure; move it to docs/benchmarks.md (or link there): %s", rel, fig.Line, fig.Text)
		}
	}
}
