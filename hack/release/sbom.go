package main

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"path"
	"runtime/debug"
	"slices"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/uuid"
	"github.com/package-url/packageurl-go"
)

// The OCI annotations hack/images puts on every image index.
const (
	versionKey = "org.opencontainers.image.version"
	createdKey = "org.opencontainers.image.created"
)

// image is the one image index of a layout `make images` wrote, with what the SBOM and the signature
// say about it.
type image struct {
	Index  v1.ImageIndex
	Digest v1.Hash
	// Tag is the layout's ref.name, the version the image is published under.
	Tag string
}

func readImage(dir string) (image, error) {
	top, m, err := readLayout(dir)
	if err != nil {
		return image{}, err
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations[refNameKey] == "" {
		return image{}, fmt.Errorf("OCI layout %s: index.json must name one tagged image index, as make images writes", dir)
	}
	desc := m.Manifests[0]
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		return image{}, fmt.Errorf("OCI layout %s: image index %s: %w", dir, desc.Digest, err)
	}
	return image{Index: idx, Digest: desc.Digest, Tag: desc.Annotations[refNameKey]}, nil
}

// goBinary is the build information of the entrypoint binary of one platform's image.
type goBinary struct {
	Platform string
	Info     *debug.BuildInfo
}

// binaries reads the Go build information of the entrypoint of every platform's image: the modules
// linked into what the image runs, which is what its SBOM lists.
func binaries(img image) ([]goBinary, error) {
	m, err := img.Index.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []goBinary
	for _, desc := range m.Manifests {
		if desc.Platform == nil {
			return nil, fmt.Errorf("image %s: manifest %s names no platform", img.Digest, desc.Digest)
		}
		platform := desc.Platform.OS + "/" + desc.Platform.Architecture
		pimg, err := img.Index.Image(desc.Digest)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", platform, err)
		}
		info, err := entrypointBuildInfo(pimg)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", platform, err)
		}
		out = append(out, goBinary{Platform: platform, Info: info})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("image %s: the index holds no image", img.Digest)
	}
	return out, nil
}

func entrypointBuildInfo(img v1.Image) (*debug.BuildInfo, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	if len(cfg.Config.Entrypoint) == 0 {
		return nil, errors.New("the image has no entrypoint")
	}
	entry := strings.TrimPrefix(path.Clean(cfg.Config.Entrypoint[0]), "/")
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	// The last layer holding the file is the one the container sees.
	for i := len(layers) - 1; i >= 0; i-- {
		exe, err := fileInLayer(layers[i], entry)
		if err != nil {
			return nil, err
		}
		if exe == nil {
			continue
		}
		info, err := buildinfo.Read(bytes.NewReader(exe))
		if err != nil {
			return nil, fmt.Errorf("/%s: Go build information: %w", entry, err)
		}
		return info, nil
	}
	return nil, fmt.Errorf("/%s, the entrypoint, is in no layer", entry)
}

func fileInLayer(layer v1.Layer, file string) ([]byte, error) {
	rc, err := layer.Uncompressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if path.Clean(h.Name) == file && h.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
	}
}

func golangPURL(module, version string) string {
	ns, n := path.Split(module)
	return packageurl.NewPackageURL(packageurl.TypeGolang, strings.TrimSuffix(ns, "/"), n, version, nil, "").ToString()
}

// sbom is the CycloneDX document of the image repo:tag at img.Digest: the image, the Go application
// in it with the version the image carries, its Go toolchain and every module linked into it. One
// document serves every platform of the index, so their binaries must link the same modules.
func sbom(img image, repo string) (*cdx.BOM, error) {
	bins, err := binaries(img)
	if err != nil {
		return nil, err
	}
	first := bins[0]
	for _, b := range bins[1:] {
		if moduleList(b.Info) != moduleList(first.Info) || b.Info.GoVersion != first.Info.GoVersion {
			return nil, fmt.Errorf("image %s: the %s and %s binaries link different modules or Go versions: one SBOM cannot describe both", img.Digest, first.Platform, b.Platform)
		}
	}
	m, err := img.Index.IndexManifest()
	if err != nil {
		return nil, err
	}
	version := m.Annotations[versionKey]
	if version == "" {
		return nil, fmt.Errorf("image %s: no %s annotation on the index", img.Digest, versionKey)
	}
	ref, err := name.NewRepository(repo)
	if err != nil {
		return nil, fmt.Errorf("image repository %q: %w", repo, err)
	}

	imageRef := "image"
	app := cdx.Component{
		BOMRef:     golangPURL(first.Info.Main.Path, version),
		Type:       cdx.ComponentTypeApplication,
		Name:       first.Info.Main.Path,
		Version:    version,
		PackageURL: golangPURL(first.Info.Main.Path, version),
		Properties: &[]cdx.Property{{Name: "go:package", Value: first.Info.Path}},
	}
	toolchain := cdx.Component{
		BOMRef:     golangPURL("stdlib", first.Info.GoVersion),
		Type:       cdx.ComponentTypeLibrary,
		Name:       "stdlib",
		Version:    first.Info.GoVersion,
		PackageURL: golangPURL("stdlib", first.Info.GoVersion),
	}
	components := []cdx.Component{app, toolchain}
	dependsOn := []string{toolchain.BOMRef}
	for _, dep := range first.Info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		c := cdx.Component{
			BOMRef:     golangPURL(dep.Path, dep.Version),
			Type:       cdx.ComponentTypeLibrary,
			Name:       dep.Path,
			Version:    dep.Version,
			PackageURL: golangPURL(dep.Path, dep.Version),
		}
		if dep.Sum != "" {
			c.Properties = &[]cdx.Property{{Name: "go:module:sum", Value: dep.Sum}}
		}
		components = append(components, c)
		dependsOn = append(dependsOn, c.BOMRef)
	}
	bom := cdx.NewBOM()
	// The serial number is made from the digest, not drawn at random, so that two runs agree.
	bom.SerialNumber = "urn:uuid:" + uuid.NewSHA1(uuid.NameSpaceURL, []byte(ref.Name()+"@"+img.Digest.String())).String()
	bom.Metadata = &cdx.Metadata{
		Timestamp: m.Annotations[createdKey],
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "sidecarops hack/release", Group: "github.com/sidecarops/sidecarops",
		}}},
		Component: &cdx.Component{
			BOMRef:     imageRef,
			Type:       cdx.ComponentTypeContainer,
			Name:       ref.Name(),
			Version:    img.Tag,
			PackageURL: ociPURL(ref, img.Digest, img.Tag),
			Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: img.Digest.Hex}},
		},
	}
	bom.Components = &components
	bom.Dependencies = &[]cdx.Dependency{
		{Ref: imageRef, Dependencies: &[]string{app.BOMRef}},
		{Ref: app.BOMRef, Dependencies: &dependsOn},
	}
	return bom, nil
}

// ociPURL is the image's package URL: pkg:oci/NAME@DIGEST?repository_url=REGISTRY/PATH&tag=TAG.
func ociPURL(ref name.Repository, digest v1.Hash, tag string) string {
	repoPath := ref.RepositoryStr()
	return packageurl.NewPackageURL("oci", "", path.Base(repoPath), digest.String(), packageurl.Qualifiers{
		{Key: "repository_url", Value: ref.Name()},
		{Key: "tag", Value: tag},
	}, "").ToString()
}

func moduleList(info *debug.BuildInfo) string {
	var lines []string
	for _, d := range info.Deps {
		lines = append(lines, d.Path+"@"+d.Version)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func encodeSBOM(bom *cdx.BOM) ([]byte, error) {
	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("SBOM: %w", err)
	}
	return buf.Bytes(), nil
}
