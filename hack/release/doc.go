// Command release makes and publishes what `make release` adds to the images and the chart: the chart
// as an OCI artifact, an SBOM of each image, and cosign-compatible signatures. It is a Go module of its
// own so that the product's go.mod carries none of the signing, SBOM or Helm libraries.
//
//	go run . chart --chart sidecarops-X.Y.Z.tgz --registry R --epoch S --out DIR
//
// writes the packaged chart as an OCI layout, made by Helm's own registry client, tagged for
// oci://R/charts/NAME:X.Y.Z.
//
//	go run . attach --layout DIR --repository REGISTRY/NAME --sbom FILE --out DIR [--key FILE --public-key-out FILE]
//
// reads an image layout `make images` wrote and writes its CycloneDX SBOM, listing the Go modules of
// the image's binaries (from their build information), and an OCI layout holding the SBOM as cosign's
// `sha256-<digest>.sbom` attachment and, with a key, the signatures of the image and of the SBOM as
// cosign's `sha256-<digest>.sig` (`cosign verify --key`).
//
//	go run . verify --layout DIR --repository REGISTRY/NAME --attachments DIR --key PUBLIC.pem
//
// checks the signatures in an attachments layout against the image's digest with a public key.
//
//	go run . push --registry R [--insecure] [--overwrite] ARCHIVE.oci.tar...
//
// pushes the chart and attachment layouts of a release directory to the references they name, which
// must be under R, each attachment after the registry holds what it is attached to.
package main
