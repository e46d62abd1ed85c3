package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

type pushOptions struct {
	Registry  string
	Insecure  bool
	Overwrite bool
	Keychain  authn.Keychain
}

// pushArchive pushes every manifest of the OCI layout archived in file (a release's chart or
// attachments) to the reference it names, which must be under the registry. An attachment goes only
// where its subject already is: a signature of an image the registry does not hold would be found by
// nothing.
func pushArchive(ctx context.Context, o pushOptions, file string) ([]string, error) {
	dir, err := os.MkdirTemp("", "sidecarops-push-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := untar(file, dir); err != nil {
		return nil, err
	}
	idx, m, err := readLayout(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var nameOpts []name.Option
	if o.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	prefix := strings.TrimSuffix(o.Registry, "/") + "/"
	remoteOpts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(o.Keychain)}
	var pushed []string
	for _, desc := range m.Manifests {
		refName := desc.Annotations[refNameKey]
		if !strings.HasPrefix(refName, prefix) {
			return nil, fmt.Errorf("%s: %s is not under --registry %s: make release REGISTRY=%s made it", file, refName, o.Registry, o.Registry)
		}
		ref, err := name.NewTag(refName, nameOpts...)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", file, refName, err)
		}
		if subject, ok := cosignSubject(ref, nameOpts); ok {
			if _, err := remote.Head(subject, remoteOpts...); err != nil {
				return nil, fmt.Errorf("%s: %s is attached to %s, which the registry does not serve (push the images first: make push does): %w", file, ref, subject, err)
			}
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", file, refName, err)
		}
		held, err := remote.Head(ref, remoteOpts...)
		var terr *transport.Error
		switch {
		case errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound:
		case err != nil:
			return nil, fmt.Errorf("reading %s: %w", ref, err)
		case held.Digest != desc.Digest && !o.Overwrite:
			return nil, fmt.Errorf("%s is %s in the registry, not %s as in %s: a published tag is not moved (--overwrite moves it: make push PUSH_ARGS=--overwrite)", ref, held.Digest, desc.Digest, file)
		}
		if err := remote.Write(ref, img, remoteOpts...); err != nil {
			return nil, fmt.Errorf("pushing %s: %w", ref, err)
		}
		pushed = append(pushed, ref.String()+"@"+desc.Digest.String())
	}
	return pushed, nil
}

// cosignSubject is the manifest a cosign tag (REPO:sha256-HEX.sig or .sbom) is attached to.
func cosignSubject(ref name.Tag, opts []name.Option) (name.Digest, bool) {
	tag := ref.TagStr()
	dot := strings.LastIndexByte(tag, '.')
	if dot < 0 || !strings.HasPrefix(tag, "sha256-") {
		return name.Digest{}, false
	}
	h, err := v1.NewHash("sha256:" + strings.TrimPrefix(tag[:dot], "sha256-"))
	if err != nil {
		return name.Digest{}, false
	}
	d, err := name.NewDigest(ref.Context().Name()+"@"+h.String(), opts...)
	if err != nil {
		return name.Digest{}, false
	}
	return d, true
}
