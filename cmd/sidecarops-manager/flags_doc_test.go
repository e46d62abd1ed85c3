package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets TestFlagsAreDocumented run this package's main in a child process of the test
// binary, so the flags are read from the command as it is built, without a go build.
func TestMain(m *testing.M) {
	if os.Getenv("SIDECAROPS_MANAGER_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// docs/operations.md, "Flags", names every flag of sidecarops-manager, and no other.
func TestFlagsAreDocumented(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-help") // #nosec G204 -- this test binary
	cmd.Env = append(os.Environ(), "SIDECAROPS_MANAGER_MAIN=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9.-]+)`).FindAllStringSubmatch(string(out), -1) {
		if !strings.HasPrefix(m[1], "test.") { // the test binary's own flags
			flags = append(flags, m[1])
		}
	}
	require.Contains(t, flags, "cert-mode", "no flags read from -help:\n%s", out)

	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	require.NoError(t, err)
	var documented []string
	inFlags := false
	name := regexp.MustCompile("`--([a-z0-9-]+)")
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inFlags = line == "## Flags"
			continue
		}
		if !inFlags || !strings.HasPrefix(line, "| `--") {
			continue
		}
		first := strings.SplitN(line[1:], " | ", 2)[0] // the row's first cell: the flags it describes
		for _, m := range name.FindAllStringSubmatch(first, -1) {
			documented = append(documented, m[1])
		}
	}
	require.NoError(t, sc.Err())
	slices.Sort(flags)
	slices.Sort(documented)
	assert.Equal(t, flags, slices.Compact(documented), "sidecarops-manager -help (-) against docs/operations.md, \"Flags\" (+)")
}
