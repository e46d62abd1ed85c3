// Command images builds the OCI images of the sidecarops manager and of the sidecar agent without a
// container daemon, a registry or a base image, so that `make images` works offline, and reproducibly:
// the same commit gives the same image digests (docs/development.md, "Images").
//
//	go run ./hack/images --version V --commit C [--epoch SECONDS] [--out dist/images]
//
// It writes one OCI layout per image (OUT/manager, OUT/agent), each holding one image index for
// linux/amd64 and linux/arm64, and OUT/digests.txt with one REPOSITORY:TAG@sha256:… line per image.
package main
