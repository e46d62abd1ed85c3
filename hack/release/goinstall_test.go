package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// `go install github.com/sidecarops/sidecarops/cmd/sidecarctl@VERSION` (docs/install.md), as a user
// runs it outside any checkout: from a module proxy that serves the repository's last commit as the
// module zip the public proxy makes from the repository (nested modules left out), into an empty
// module cache. A replace or exclude directive in go.mod, a package only a nested module holds or a
// go.sum short of a line fails it; the other modules come from the local module cache, so nothing is
// fetched. -trimpath lets the build reuse what other builds of the same sources compiled.
func TestGoInstallAtAVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sidecarctl from a module proxy")
	}
	ctx := context.Background()
	root := repoRoot(t)
	const (
		modPath = "github.com/sidecarops/sidecarops"
		version = "v0.1.0"
	)
	modCache, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	require.NoError(t, err)

	proxy := t.TempDir()
	dir := filepath.Join(proxy, modPath, "@v")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	zipFile, err := os.Create(filepath.Join(dir, version+".zip"))
	require.NoError(t, err)
	require.NoError(t, modzip.CreateFromVCS(zipFile, module.Version{Path: modPath, Version: version}, root, "HEAD", ""))
	require.NoError(t, zipFile.Close())
	gomod, err := exec.CommandContext(ctx, "git", "-C", root, "show", "HEAD:go.mod").Output()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, version+".mod"), gomod, 0o600))
	info, err := json.Marshal(map[string]any{"Version": version, "Time": time.Unix(testEpoch, 0).UTC()})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, version+".info"), info, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "list"), []byte(version+"\n"), 0o600))

	bin, work := t.TempDir(), t.TempDir()
	cmd := exec.CommandContext(ctx, "go", "install", modPath+"/cmd/sidecarctl@"+version)
	cmd.Dir = work
	cmd.Env = append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(strings.TrimSpace(string(modCache)), "cache", "download")),
		"GOMODCACHE="+filepath.Join(t.TempDir(), "mod"),
		// The checksum database does not know this module's made-up version and is not reached from
		// here for the others; a user's go install checks them against it.
		"GOSUMDB=off",
		"GOFLAGS=-modcacherw -trimpath",
		"GOWORK=off",
		"GOBIN="+bin,
	)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.CommandContext(ctx, filepath.Join(bin, "sidecarctl"), "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	// The version go install records, which sidecarctl reports when the build stamped none.
	require.Contains(t, string(out), "sidecarctl "+version+" ")
}
