package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Refusals say what to fix (issue 31 item 5): OpenKruise's message first where compatibility
// depends on it, then the field, the value and the fix.

func TestWhitelistRefusalNamesKeyAndRule(t *testing.T) {
	// examples/patch-metadata's SidecarSet, labelled for another team than the whitelist's rule.
	ss := strings.Replace(string(mustRead(t, "examples/patch-metadata/sidecarset.yaml")), "team: logging", "team: web", 1)
	f := filepath.Join(t.TempDir(), "ss.yaml")
	require.NoError(t, os.WriteFile(f, []byte(ss), 0o600))
	_, errOut, code := sidecarctl(t, "", "check", "-f", f, "--bundle", "examples/whitelist-bundle")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "spec.patchPodMetadata[1].annotations[logging.example.com/scrape]: Forbidden: "+
		"sidecarSet patch metadata annotation(logging.example.com/scrape) is not allowed; "+
		`rules[1] would allow it, but not for this SidecarSet: its labels {"team":"web"} do not match the selector; label the SidecarSet to match, or widen the selector`)

	// No rule allows the key anywhere: the expression to add, and the rules it may go into.
	f2 := filepath.Join(t.TempDir(), "ss.yaml")
	require.NoError(t, os.WriteFile(f2, []byte(strings.Replace(ss, "logging.example.com/scrape", "metrics.example.com/port", 1)), 0o600))
	_, errOut, code = sidecarctl(t, "", "check", "-f", f2, "--bundle", "examples/whitelist-bundle")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `annotation(metrics.example.com/port) is not allowed; add the expression ^metrics\.example\.com/port$ to allowedAnnotationKeyExprs of a whitelist rule that applies to this SidecarSet (rules[0])`)
}

func TestBundleWithoutManifestSaysSo(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gates.rego"), mustRead(t, "examples/policies/gates.rego"), 0o600))
	for _, cmd := range []string{"check", "inject", "explain"} {
		_, errOut, code := sidecarctl(t, "", cmd, "-f", "examples/logging", "--bundle", dir)
		assert.Equal(t, 1, code, cmd)
		assert.Equal(t, dir+`: bundle refused: no .manifest naming its roots, so it would own all of data, the compiled policies' root "sidecarops" included: `+
			`write {"roots": ["gates"]} (a gate) or {"roots": ["whitelist"]} (a whitelist) to `+filepath.Join(dir, ".manifest")+"\n", errOut, cmd)
	}
	// With it, the same directory is a gate bundle.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".manifest"), []byte(`{"roots": ["gates"]}`), 0o600))
	_, errOut, code := sidecarctl(t, "", "check", "-f", "examples/logging", "--bundle", dir)
	assert.Equal(t, 0, code, errOut)
}

func TestNativeSidecarSaysNotUpdate(t *testing.T) {
	// The default updateStrategy is RollingUpdate, which cannot upgrade an init container.
	f := filepath.Join(t.TempDir(), "ss.yaml")
	require.NoError(t, os.WriteFile(f, []byte(`apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata:
  name: mesh
spec:
  selector:
    matchLabels:
      app: web
  initContainers:
  - name: proxy
    image: example.com/proxy:1
    restartPolicy: Always
`), 0o600))
	_, errOut, code := sidecarctl(t, "", "check", "-f", f)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "(SidecarSet/mesh): spec.updateStrategy: Required value: The initContainer in-place upgrade is not currently supported. "+
		"(spec.initContainers[0], proxy, is a native sidecar: restartPolicy Always; set updateStrategy.type: NotUpdate)")
	// The fix, applied, is admitted.
	written, err := os.ReadFile(f)
	require.NoError(t, err)
	fixed := strings.Replace(string(written), "spec:\n", "spec:\n  updateStrategy:\n    type: NotUpdate\n", 1)
	require.NoError(t, os.WriteFile(f, []byte(fixed), 0o600))
	_, errOut, code = sidecarctl(t, "", "check", "-f", f)
	assert.Equal(t, 0, code, errOut)
}

// TestRolloutPlanNamesTheFieldWithoutRevisions: no ControllerRevision is given, so the changed field
// is told from the pod's injected sidecar; where the pod cannot tell, the plan says how to get the
// revisions instead of leaving two hashes.
func TestRolloutPlanNamesTheFieldWithoutRevisions(t *testing.T) {
	dir := t.TempDir()
	pods := storedPods(t, dir, 2, "1.0")
	// pod-1 records another without-image hash although its sidecar is the SidecarSet's: a change
	// outside the containers.
	pods[1].Annotations["kruise.io/sidecarset-hash-without-image"] = `{"proxy":{"hash":"other","sidecarSetName":"proxy"}}`
	writePods(t, filepath.Join(dir, "pods.yaml"), pods)
	changed := fmt.Sprintf(rolloutSidecarSet, "2.0") + "    env:\n    - name: LOG_LEVEL\n      value: debug\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ss.yaml"), []byte(changed), 0o600))

	out, errOut, code := sidecarctl(t, "", "rollout", "plan", "-f", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "    shop/pod-0: differs from the sidecars injected into the pod: spec.containers[0].env (only images can change in place)\n")
	assert.Contains(t, out, "    shop/pod-1: differs from the sidecars injected into the pod: spec.containers[0].env (only images can change in place)\n")

	// Only the hash differs: nothing in the pod names a field.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ss.yaml"), []byte(fmt.Sprintf(rolloutSidecarSet, "2.0")), 0o600))
	out, errOut, code = sidecarctl(t, "", "rollout", "plan", "-f", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "    shop/pod-1: hash-without-image differs: a field other than image changed (pod other, SidecarSet ")
	assert.Contains(t, out, "); give the ControllerRevisions (`kubectl get controllerrevisions -n kruise-system -o yaml`, or -n sidecarops-system) to see which field\n")
	assert.NotContains(t, out, "shop/pod-0:", "pod-0 only needs a new image")
}
