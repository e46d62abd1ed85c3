package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/registry"
	"sigs.k8s.io/yaml"
)

const testEpoch = 1700000000

// The chart make release packages becomes an OCI layout that pushes to REGISTRY/charts/sidecarops,
// from which both Helm versions pull the very archive that was packaged.
func TestChartIsPublishedForHelm(t *testing.T) {
	bins := helmBinaries(t)
	root := repoRoot(t)
	tmp := t.TempDir()
	var meta struct{ Name, Version string }
	chartYAML, err := os.ReadFile(filepath.Join(root, "charts", "sidecarops", "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(chartYAML, &meta))

	var packager string
	for _, bin := range bins {
		packager = bin
	}
	_, err = helm(t, packager, "package", filepath.Join(root, "charts", "sidecarops"), "--destination", tmp)
	require.NoError(t, err)
	tgz := filepath.Join(tmp, meta.Name+"-"+meta.Version+".tgz")
	packaged, err := os.ReadFile(tgz)
	require.NoError(t, err)

	host := testRegistry(t)
	dirs := []string{filepath.Join(tmp, "first"), filepath.Join(tmp, "second")}
	for _, dir := range dirs {
		ref, err := chartLayout(tgz, host, time.Unix(testEpoch, 0), dir)
		require.NoError(t, err)
		assert.Equal(t, host+"/charts/"+meta.Name+":"+meta.Version, ref)
	}
	first, err := os.ReadFile(filepath.Join(dirs[0], "index.json"))
	require.NoError(t, err)
	second, err := os.ReadFile(filepath.Join(dirs[1], "index.json"))
	require.NoError(t, err)
	assert.Equal(t, string(first), string(second), "the same chart and time make the same manifest")

	p, err := layout.FromPath(dirs[0])
	require.NoError(t, err)
	idx, err := p.ImageIndex()
	require.NoError(t, err)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 1)
	img, err := idx.Image(im.Manifests[0].Digest)
	require.NoError(t, err)
	m, err := img.Manifest()
	require.NoError(t, err)
	assert.Equal(t, registry.ConfigMediaType, string(m.Config.MediaType), "Helm's config media type")
	require.Len(t, m.Layers, 1)
	assert.Equal(t, registry.ChartLayerMediaType, string(m.Layers[0].MediaType), "Helm's chart media type")
	assert.Equal(t, time.Unix(testEpoch, 0).UTC().Format(time.RFC3339), m.Annotations["org.opencontainers.image.created"])

	archive := tarDir(t, dirs[0])
	_, err = pushArchive(context.Background(), testPushOptions("registry.example.com/platform"), archive)
	require.ErrorContains(t, err, "is not under --registry registry.example.com/platform")
	pushed, err := pushArchive(context.Background(), testPushOptions(host), archive)
	require.NoError(t, err)
	assert.Equal(t, []string{host + "/charts/" + meta.Name + ":" + meta.Version + "@" + im.Manifests[0].Digest.String()}, pushed)

	for name, bin := range bins {
		t.Run(name, func(t *testing.T) {
			chartRef := "oci://" + host + "/charts/" + meta.Name
			out, err := helm(t, bin, "show", "chart", chartRef, "--version", meta.Version, "--plain-http")
			require.NoError(t, err)
			assert.Contains(t, out, "name: "+meta.Name)
			assert.Contains(t, out, "version: "+meta.Version)
			dest := t.TempDir()
			_, err = helm(t, bin, "pull", chartRef, "--version", meta.Version, "--plain-http", "--destination", dest)
			require.NoError(t, err)
			pulled, err := os.ReadFile(filepath.Join(dest, meta.Name+"-"+meta.Version+".tgz"))
			require.NoError(t, err)
			assert.Equal(t, packaged, pulled, "helm pull gives the archive make release packaged")
		})
	}
}
