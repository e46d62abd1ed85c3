// Package testfiles writes trees of small files for tests: bundles, cgroup hierarchies, manifests.
// It owns nothing else and must not be imported outside tests.
package testfiles

import (
	"os"
	"path/filepath"
	"testing"
)

// Write writes files (path relative to dir: content) under dir, creating the directories they need.
func Write(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}
