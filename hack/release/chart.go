package main

import (
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/registry"
)

// chartRepository is where a chart is published under a registry prefix: oci://REGISTRY/charts/NAME.
func chartRepository(registryPrefix, chartName string) string {
	return strings.TrimSuffix(registryPrefix, "/") + "/charts/" + chartName
}

// chartLayout writes the packaged chart tgz as an OCI layout in out, its manifest exactly as `helm
// push` makes it: Helm's registry client pushes it to an in-process registry, from which it is copied
// blob for blob. The creation time is the release's, so that two runs give the same digest.
func chartLayout(tgz, registryPrefix string, epoch time.Time, out string) (string, error) {
	data, err := os.ReadFile(tgz) //nolint:gosec // G304: the chart make release packaged
	if err != nil {
		return "", fmt.Errorf("chart: %w", err)
	}
	ch, err := loader.LoadArchive(strings.NewReader(string(data)))
	if err != nil {
		return "", fmt.Errorf("chart %s: %w", tgz, err)
	}
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	local := strings.TrimPrefix(srv.URL, "http://")

	client, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard))
	if err != nil {
		return "", fmt.Errorf("chart: Helm's registry client: %w", err)
	}
	tag := ch.Metadata.Version
	staged := chartRepository(local, ch.Metadata.Name) + ":" + tag
	if _, err := client.Push(data, staged, registry.PushOptCreationTime(epoch.UTC().Format(time.RFC3339))); err != nil {
		return "", fmt.Errorf("chart %s: helm push to the staging registry: %w", tgz, err)
	}
	stagedRef, err := name.NewTag(staged)
	if err != nil {
		return "", fmt.Errorf("chart: %w", err)
	}
	img, err := remote.Image(stagedRef)
	if err != nil {
		return "", fmt.Errorf("chart: reading back %s: %w", staged, err)
	}
	ref := chartRepository(registryPrefix, ch.Metadata.Name) + ":" + tag
	if _, err := name.NewTag(ref); err != nil {
		return "", fmt.Errorf("chart: --registry %q does not make a chart reference: %w", registryPrefix, err)
	}
	if err := writeLayout(out, []named{{Ref: ref, Manifest: img}}); err != nil {
		return "", fmt.Errorf("chart: %w", err)
	}
	return ref, nil
}
