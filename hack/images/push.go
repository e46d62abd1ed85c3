package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

type pushOptions struct {
	// In is where `make images` wrote the layouts (IN/manager, IN/agent).
	In       string
	Registry string
	// Version, if set, must be the tag the layouts hold: pushing a build under another version's tag
	// would publish images whose labels and binaries say something else.
	Version string
	// Insecure allows plain HTTP to any registry; go-containerregistry already falls back to it for
	// localhost, loopback and private addresses.
	Insecure bool
	// Overwrite lets a push move a tag the registry already holds for another digest; without it a
	// published version stays what it was (nodes that pulled it by tag would otherwise disagree).
	Overwrite bool
	// Timeout bounds each image's push and the check after it.
	Timeout  time.Duration
	Keychain authn.Keychain
	Images   []imageSpec
}

// push copies each OCI layout's image index to REGISTRY/NAME:TAG as it is, blob for blob, so the
// digest in the registry is the digest `make images` printed. Blobs and manifests the registry already
// has are not sent again, so pushing twice changes nothing.
func push(ctx context.Context, o pushOptions) ([]built, error) {
	var out []built
	for _, spec := range o.Images {
		b, err := pushImage(ctx, o, spec)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func pushImage(ctx context.Context, o pushOptions, spec imageSpec) (built, error) {
	dir := filepath.Join(o.In, spec.Name)
	idx, tag, digest, err := readLayout(dir)
	if err != nil {
		return built{}, fmt.Errorf("image %s: %w (run make images first)", spec.Name, err)
	}
	if o.Version != "" && o.Version != tag {
		return built{}, fmt.Errorf("image %s: %s holds version %s, not %s: run make images VERSION=%s first", spec.Name, dir, tag, o.Version, o.Version)
	}
	var nameOpts []name.Option
	if o.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	repo := repository(o.Registry, spec)
	ref, err := name.NewTag(repo+":"+tag, nameOpts...)
	if err != nil {
		return built{}, fmt.Errorf("image %s: --registry %q: %w", spec.Name, o.Registry, err)
	}

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	remoteOpts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(o.Keychain)}
	fail := func(what string, err error) (built, error) {
		// Asked of the context: go-containerregistry's error does not always wrap the deadline's.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("not done within --timeout %s: %w", o.Timeout, err)
		}
		return built{}, fmt.Errorf("image %s: %s %s: %w", spec.Name, what, ref, err)
	}
	held, err := remote.Head(ref, remoteOpts...)
	var terr *transport.Error
	switch {
	case errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound:
		// A new tag.
	case err != nil:
		return fail("reading", err)
	case held.Digest != digest && !o.Overwrite:
		return built{}, fmt.Errorf("image %s: %s is %s in the registry, not %s as in %s: a published tag is not moved (--overwrite moves it: make push PUSH_ARGS=--overwrite)", spec.Name, ref, held.Digest, digest, dir)
	}
	if err := remote.WriteIndex(ref, idx, remoteOpts...); err != nil {
		return fail("pushing "+dir+" to", err)
	}
	// What the registry now serves under the tag, so the line printed is what a node will pull.
	desc, err := remote.Head(ref, remoteOpts...)
	if err != nil {
		return fail("reading back", err)
	}
	if desc.Digest != digest {
		return built{}, fmt.Errorf("image %s: %s is %s in the registry after the push, not %s as in %s", spec.Name, ref, desc.Digest, digest, dir)
	}
	return built{Repository: repo, Tag: tag, Digest: digest}, nil
}

// readLayout returns the one image index a layout of build's holds, with its tag.
func readLayout(dir string) (v1.ImageIndex, string, v1.Hash, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, "", v1.Hash{}, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, "", v1.Hash{}, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, "", v1.Hash{}, fmt.Errorf("OCI layout %s: index.json: %w", dir, err)
	}
	if len(m.Manifests) != 1 {
		return nil, "", v1.Hash{}, fmt.Errorf("OCI layout %s: index.json names %d manifests, not the one image index make images writes", dir, len(m.Manifests))
	}
	desc := m.Manifests[0]
	tag := desc.Annotations[refNameKey]
	if tag == "" {
		return nil, "", v1.Hash{}, fmt.Errorf("OCI layout %s: index.json gives its image no tag (%s)", dir, refNameKey)
	}
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		return nil, "", v1.Hash{}, fmt.Errorf("OCI layout %s: image index %s: %w", dir, desc.Digest, err)
	}
	return idx, tag, desc.Digest, nil
}
