package manifests

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The chart tests (TestChart…, every test here that runs Helm) again with Helm 3, which make test-go
// builds and names in SIDECAROPS_HELM3 (docs/install.md, "Helm versions"): this test binary runs them
// in a child process whose SIDECAROPS_HELM is Helm 3, so each assertion holds for both Helms. Those of
// NOTES.txt are left out: only `helm install --dry-run=client` renders it, and Helm 3's asks the
// cluster for its version first (Kubernetes cluster unreachable), where Helm 4's does not.
func TestChartWithHelm3(t *testing.T) {
	helm3 := os.Getenv("SIDECAROPS_HELM3")
	if helm3 == "" {
		t.Skip("SIDECAROPS_HELM3 is not set: make test-go builds Helm 3 and sets it")
	}
	if os.Getenv("SIDECAROPS_HELM") == helm3 {
		t.Skip("this process is the one running the chart tests with Helm 3")
	}
	version, err := exec.Command(helm3, "version", "--short").Output() // #nosec G204 -- the Helm make test-go built
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(version), "v3."), "SIDECAROPS_HELM3 is Helm %s", version)

	cmd := exec.Command(os.Args[0], "-test.run", "^TestChart", "-test.skip", "^TestChartNotes", "-test.count=1", "-test.v") // #nosec G204 -- this test binary
	cmd.Env = append(os.Environ(), "SIDECAROPS_HELM="+helm3)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the chart tests with Helm %s:\n%s", strings.TrimSpace(string(version)), out)
	require.Contains(t, string(out), "--- PASS: TestChartLint", "the child ran the chart tests")
	t.Logf("%d chart tests passed with Helm %s", strings.Count(string(out), "\n--- PASS: TestChart"), strings.TrimSpace(string(version)))
}
