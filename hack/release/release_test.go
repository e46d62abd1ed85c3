package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/require"
)

// repoRoot is the sidecarops checkout this module sits in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "hack/release is tested inside the sidecarops checkout")
	return root
}

// testRegistry is go-containerregistry's in-memory registry on a loopback port, reached over plain
// HTTP; it returns the registry's host:port.
func testRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// tarDir archives dir as make release does (hack/release.sh), for push to read.
func tarDir(t *testing.T, dir string) string {
	t.Helper()
	file := dir + ".oci.tar"
	out, err := exec.CommandContext(context.Background(), "tar", "-C", dir, "-cf", file, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return file
}

func testPushOptions(registryHost string) pushOptions {
	return pushOptions{Registry: registryHost, Keychain: authn.DefaultKeychain}
}

// helmBinaries are the Helm binaries `make test` passes (docs/install.md, "Helm versions"), by name.
func helmBinaries(t *testing.T) map[string]string {
	t.Helper()
	bins := map[string]string{}
	for name, env := range map[string]string{"helm4": "SIDECAROPS_HELM", "helm3": "SIDECAROPS_HELM3"} {
		if p := os.Getenv(env); p != "" {
			bins[name] = p
		}
	}
	if len(bins) == 0 {
		t.Skip("SIDECAROPS_HELM and SIDECAROPS_HELM3 are not set: run through make test-go, which builds them")
	}
	return bins
}

// helm runs a Helm binary with its configuration, cache and data in a temporary directory.
func helm(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(context.Background(), bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache", "HELM_DATA_HOME="+home+"/data")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	return string(out), nil
}
