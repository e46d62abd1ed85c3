package manifests

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/internal/testing/render"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// config/default names the manager's image by config/manager's images: entry, at the version the chart
// ships, and the agent's example names the agent's at the same version: the images hack/images builds.
// An overlay's images: step (docs/install.md, "Images"; hack/release.sh's install.yaml) points either at
// another registry by tag and digest.
func TestKustomizeImages(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	chartYAML, err := os.ReadFile(filepath.Join(root, "charts", "sidecarops", "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(chartYAML, &chart))
	require.NotEmpty(t, chart.AppVersion)

	for _, tc := range []struct {
		name, dir, object string
		containers        []string
		image             string
	}{
		{
			name: "manager", dir: "config/default", object: "Deployment/sidecarops-system/sidecarops-manager",
			containers: []string{"spec", "template", "spec", "containers"}, image: "manager",
		},
		{
			name: "agent", dir: "examples/sidecar-agent", object: "SidecarSet/sidecar-agent",
			containers: []string{"spec", "containers"}, image: "agent",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			image := func(t *testing.T, dir string) string {
				t.Helper()
				objs, err := render.Kustomize(dir)
				require.NoError(t, err)
				require.Contains(t, objs, tc.object)
				containers, _, err := unstructured.NestedSlice(objs[tc.object].Object, tc.containers...)
				require.NoError(t, err)
				require.Len(t, containers, 1)
				image, _, err := unstructured.NestedString(containers[0].(map[string]any), "image")
				require.NoError(t, err)
				return image
			}
			assert.Equal(t, "ghcr.io/sidecarops/"+tc.image+":"+chart.AppVersion, image(t, filepath.Join(root, tc.dir)),
				"%s: the chart's appVersion", tc.dir)

			overlay := t.TempDir()
			base, err := filepath.Rel(overlay, filepath.Join(root, tc.dir))
			require.NoError(t, err)
			kustomization := "resources:\n  - " + base + "\n" + `images:
  - name: ghcr.io/sidecarops/` + tc.image + `
    newName: registry.example.com/platform/` + tc.image + `
    newTag: v1.2.3
    digest: ` + testDigest + "\n"
			require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o600))
			assert.Equal(t, "registry.example.com/platform/"+tc.image+":v1.2.3@"+testDigest, image(t, overlay), "an overlay's images:")
		})
	}
}
