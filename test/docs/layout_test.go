package docs

import (
	"errors"
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/testing/doctable"
)

// docs/design.md's rule for top level or internal/: what composes the parts for one binary, or is
// plumbing, lives under internal/ and builds on the parts, never on the faces; only the test harness
// (internal/testing/) may run the manager. The ground floor, sidecarset/, stands on api/ alone.
func TestLayoutRule(t *testing.T) {
	root, err := doctable.Root()
	require.NoError(t, err)
	const module = "github.com/sidecarops/sidecarops/"
	for _, tc := range []struct {
		dir    string   // a tree of packages, relative to the root
		except string   // a subtree the rule leaves out
		refuse []string // import path prefixes its production files must not import, under module
		but    []string // prefixes among those that are parts, not faces: allowed
		allow  []string // or, when set, the only ones they may
	}{
		{dir: "internal", except: "internal/testing", refuse: []string{"controller", "webhook", "manager", "cmd"},
			but: []string{"controller/rollout", "controller/managed"}},
		{dir: "sidecarset", allow: []string{"api/", "sidecarset/"}},
	} {
		packages := 0
		err := filepath.WalkDir(filepath.Join(root, tc.dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if tc.except != "" && (rel == tc.except || strings.HasPrefix(rel, tc.except+"/")) {
				return filepath.SkipDir
			}
			pkg, err := build.ImportDir(path, 0)
			if noGo := (*build.NoGoError)(nil); errors.As(err, &noGo) {
				return nil
			}
			require.NoError(t, err, rel)
			packages++
			for _, imp := range pkg.Imports {
				own, ok := strings.CutPrefix(imp, module)
				if !ok {
					continue
				}
				for _, r := range tc.refuse {
					if under(own, r) && !slices.ContainsFunc(tc.but, func(b string) bool { return under(own, b) }) {
						t.Errorf("%s imports %s (docs/design.md#top-level-or-internal)", rel, imp)
					}
				}
				if tc.allow != nil {
					allowed := false
					for _, a := range tc.allow {
						allowed = allowed || strings.HasPrefix(own, a)
					}
					assert.True(t, allowed, "%s imports %s (docs/design.md#top-level-or-internal)", rel, imp)
				}
			}
			return nil
		})
		require.NoError(t, err)
		assert.Greater(t, packages, 5, "%s: the walk found too few packages", tc.dir)
	}
}

// under reports whether the package path p is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
