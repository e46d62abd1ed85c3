// Package testfiles writes trees of small files for tests (bundles, cgroup hierarchies, manifests)
// and reads back the ends of the logs test harnesses keep. It owns nothing else; only tests and
// their harnesses (internal/testing) import it.
package testfiles

import (
	"bytes"
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

// Tail returns the end of the file at path, at most limit bytes starting at a line, for failure
// messages; "" when there is no such file.
func Tail(path string, limit int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) <= limit {
		return string(b)
	}
	cut := len(b) - limit
	if b[cut-1] != '\n' {
		if i := bytes.IndexByte(b[cut:], '\n'); i >= 0 {
			cut += i + 1
		}
	}
	return string(b[cut:])
}
