package kwok

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestImageIDStripsTagAndDigestOnly(t *testing.T) {
	for image, repo := range map[string]string{
		"example.com/app:1.0":                 "example.com/app",
		"example.com:5000/app":                "example.com:5000/app",
		"example.com:5000/app:1.0":            "example.com:5000/app",
		"nginx@sha256:abc":                    "nginx",
		"example.com/app:1.0@sha256:abc":      "example.com/app",
		"example.com:5000/team/app:v2-rc.1_x": "example.com:5000/team/app",
	} {
		id := ImageID(image)
		assert.True(t, strings.HasPrefix(id, "docker-pullable://"+repo+"@sha256:"), "%s -> %s", image, id)
		assert.Len(t, strings.TrimPrefix(id, "docker-pullable://"+repo+"@sha256:"), 64, image)
	}
	assert.NotEqual(t, ImageID("example.com/app:1.0"), ImageID("example.com/app:2.0"))
	assert.Equal(t, ImageID("example.com/app:1.0"), ImageID("example.com/app:1.0"))
}

// The embedded stages are what kwok loads; a YAML slip would only show up as kwok refusing to
// start, so it is caught here without the binary.
func TestStagesAreWellFormedAndDistinct(t *testing.T) {
	files, err := fs.Glob(stages, "stages/*.yaml")
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range files {
		b, err := stages.ReadFile(f)
		require.NoError(t, err)
		var s struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				ResourceRef struct {
					Kind string `json:"kind"`
				} `json:"resourceRef"`
				Next struct {
					StatusTemplate string `json:"statusTemplate"`
					Delete         bool   `json:"delete"`
				} `json:"next"`
			} `json:"spec"`
		}
		require.NoError(t, yaml.Unmarshal(b, &s), f)
		assert.Equal(t, "kwok.x-k8s.io/v1alpha1", s.APIVersion, f)
		assert.Equal(t, "Stage", s.Kind, f)
		assert.NotEmpty(t, s.Spec.ResourceRef.Kind, f)
		assert.True(t, s.Spec.Next.StatusTemplate != "" || s.Spec.Next.Delete, "%s does nothing", f)
		assert.False(t, names[s.Metadata.Name], "duplicate stage %s", s.Metadata.Name)
		names[s.Metadata.Name] = true
	}
	for _, want := range []string{"node-initialize", "pod-ready", "pod-image-change", "pod-delete"} {
		assert.True(t, names[want], "stage %s missing", want)
	}
}
