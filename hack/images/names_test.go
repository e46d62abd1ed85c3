package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// imageWord is a word naming one of the images: what precedes it on the path (a registry, a scheme,
// nothing), the name, and what follows the name without a separator (which makes it another word).
var imageWord = regexp.MustCompile(`([\w.\-/:]*?)sidecarops/(manager|agent|sidecar-agent)([\w\-]*)`)

// strays are the image names in line that nothing publishes: anything but ghcr.io/sidecarops/manager
// and ghcr.io/sidecarops/agent (with a tag or digest after them). Go import paths of the module's
// manager and agent packages are not images. Where the registry is configurable, the manifests say
// $(REGISTRY)/manager, which does not spell sidecarops/ at all.
func strays(line string) []string {
	var out []string
	for _, m := range imageWord.FindAllStringSubmatch(line, -1) {
		prefix, image, rest := m[1], m[2], m[3]
		if rest != "" || strings.HasSuffix(prefix, "github.com/sidecarops/") {
			continue
		}
		if _, host, ok := strings.Cut(prefix, "://"); ok {
			prefix = host
		}
		if prefix == "ghcr.io/" && image != "sidecar-agent" {
			continue
		}
		out = append(out, m[0])
	}
	return out
}

func TestStrays(t *testing.T) {
	for line, want := range map[string][]string{
		"image: ghcr.io/sidecarops/manager:v0.1.0":                       nil,
		"  - name: ghcr.io/sidecarops/agent@sha256:abc":                  nil,
		"see https://ghcr.io/sidecarops/manager":                         nil,
		`"github.com/sidecarops/sidecarops/agent/storage"`:               nil,
		`"github.com/sidecarops/sidecarops/manager"`:                     nil,
		"$(REGISTRY)/manager:$(VERSION)":                                 nil,
		"sidecarops/managers, sidecarops/agent-config":                   nil,
		"image: sidecarops/manager:latest":                               {"sidecarops/manager"},
		"image: ghcr.io/sidecarops/sidecar-agent:v0.1.0":                 {"ghcr.io/sidecarops/sidecar-agent"},
		"--set image.repository=registry.example.com/sidecarops/manager": {"registry.example.com/sidecarops/manager"},
		"`sidecarops/agent` and docker.io/sidecarops/manager":            {"sidecarops/agent", "docker.io/sidecarops/manager"},
		"${REGISTRY}/sidecarops/agent":                                   {"/sidecarops/agent"},
	} {
		assert.Equal(t, want, strays(line), "%q", line)
	}
}

// One name per image across the repository (issue 30): every file git knows of, or would add, is read
// for names of the images that no registry serves, such as the ones the chart, config/ and the agent's
// example used to give.
func TestOneNamePerImage(t *testing.T) {
	root, err := productRoot()
	require.NoError(t, err)
	cmd := exec.CommandContext(context.Background(), "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "git ls-files")
	// This file spells the strays it looks for.
	self := filepath.ToSlash(filepath.Join("hack", "images", "names_test.go"))

	var found []string
	files := 0
	for _, path := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if path == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, path))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted and not yet committed
		}
		require.NoError(t, err)
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary
		}
		files++
		for i, line := range strings.Split(string(b), "\n") {
			for _, s := range strays(line) {
				found = append(found, fmt.Sprintf("%s:%d: %s", path, i+1, s))
			}
		}
	}
	require.Positive(t, files)
	if len(found) > 0 {
		t.Errorf("image names nothing publishes; the images are ghcr.io/sidecarops/manager and ghcr.io/sidecarops/agent, "+
			"and one's own registry replaces the ghcr.io/sidecarops prefix (make images/push REGISTRY=, image.repository, kustomize images:):\n%s",
			strings.Join(found, "\n"))
	}
}
