// Command images builds the OCI images of the sidecarops manager and of the sidecar agent without a
// container daemon, a registry or a base image, so that `make images` works offline, and reproducibly:
// the same commit gives the same image digests (docs/development.md, "Images").
//
//	go -C hack/images run . --version V --commit C [--registry ghcr.io/sidecarops] [--epoch SECONDS] [--out dist/images]
//
// It writes one OCI layout per image (OUT/manager, OUT/agent), each holding one image index for
// linux/amd64 and linux/arm64, and OUT/digests.txt with one REGISTRY/NAME:TAG@sha256:… line per image.
//
//	go -C hack/images run . push [--registry ghcr.io/sidecarops] [--version V] [--in dist/images] [--insecure] [--timeout 10m]
//
// pushes those layouts to REGISTRY/NAME:TAG as they are (`make push`), with the credentials of
// `docker login` or `podman login`, and prints the same lines, read back from the registry.
package main
