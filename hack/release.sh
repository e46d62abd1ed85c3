#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: everything a release publishes, in dist/release/vX.Y.Z, built from the
# checked-out commit. Nothing is uploaded anywhere. The directory holds:
#   sidecarctl-vX.Y.Z-{linux,darwin}-{amd64,arm64}   the CLI, static, stamped with the version
#   sidecarops-{manager,agent}-vX.Y.Z.oci.tar        the images (OCI layouts, linux/amd64 and arm64)
#   digests.txt                                      each image by tag and digest
#   sidecarops-X.Y.Z.tgz                             the Helm chart, its image pinned by tag and digest
#   sidecarops-chart-X.Y.Z.oci.tar                   the same chart as an OCI layout, for oci://REGISTRY/charts/sidecarops
#   sidecarops-{manager,agent}-vX.Y.Z.cdx.json       each image's SBOM (CycloneDX): the Go modules of its binary
#   sidecarops-{manager,agent}-vX.Y.Z.cosign.oci.tar the SBOM as cosign's attachment and, with COSIGN_KEY, the
#                                                    image's and the SBOM's signatures (cosign verify --key)
#   cosign.pub                                       with COSIGN_KEY: its public key
#   install.yaml                                     config/default rendered, image by tag and digest
# The images are named $REGISTRY/manager and $REGISTRY/agent (REGISTRY: ghcr.io/sidecarops unless set),
# in digests.txt, the chart and install.yaml alike.
#   CHANGELOG.md                                     with this release's entry (checked, not written)
#   SHA256SUMS                                       of every file above
# Reproducible: the binaries are built with -trimpath and every time in the images and archives is
# the commit's (SOURCE_DATE_EPOCH), so two runs on one commit give the same files, signatures aside
# (an ECDSA signature is new each time). COSIGN_KEY names the signing key (a cosign key, with
# COSIGN_PASSWORD, or a PEM private key); without it the release is built with its images unsigned.
# hack/images and hack/release, Go modules of their own, make the images, and the chart's layout, the SBOMs
# and the signatures.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "release: $*" >&2; exit 1; }

version=${VERSION:-}
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  die "VERSION must be a semantic version with a leading v (make release VERSION=v0.1.0), not '${version}'"
chart_version=${version#v}
registry=${REGISTRY:-ghcr.io/sidecarops}
registry=${registry%/}
go=${GO:-go}
helm=${HELM:?the Helm binary (make release passes it)}
commit=$(git rev-parse HEAD)
git diff --quiet HEAD -- || [[ ${ALLOW_DIRTY:-} == 1 ]] ||
  die "the working tree has uncommitted changes: a release is built from a commit (ALLOW_DIRTY=1 to build anyway)"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}

grep -q "^## \[${chart_version}\]" CHANGELOG.md ||
  die "CHANGELOG.md has no entry for ${chart_version}: add '## [${chart_version}] - $(date -u +%F)' with its changes"

out=dist/release/$version
rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# An OCI layout directory as a tar archive whose bytes depend on its files alone.
archive() { tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner --format=ustar -C "$1" -cf "$2" .; }

ldflags="-X github.com/sidecarops/sidecarops/internal/version.Version=$version -X github.com/sidecarops/sidecarops/internal/version.Commit=$commit"
for os in linux darwin; do
  for arch in amd64 arm64; do
    echo "sidecarctl $os/$arch"
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$go" build -trimpath -ldflags "$ldflags" -o "$out/sidecarctl-$version-$os-$arch" ./cmd/sidecarctl
  done
done

echo "images"
"$go" -C hack/images run . --go "$go" --version "$version" --commit "$commit" --registry "$registry" --out "$tmp/images" >/dev/null
cp "$tmp/images/digests.txt" "$out/"
for image in manager agent; do
  archive "$tmp/images/$image" "$out/sidecarops-$image-$version.oci.tar"
done
manager_digest=$(awk -F@ -v name="$registry/manager:$version" '$1 == name {print $2}' "$out/digests.txt")
[[ $manager_digest =~ ^sha256:[0-9a-f]{64}$ ]] || die "no $registry/manager:$version digest in digests.txt"
image_ref="$registry/manager:$version@$manager_digest"

echo "chart"
cp -r charts/sidecarops "$tmp/chart"
# The image's repository, tag and digest, in values.yaml's one image: block (at any indentation).
sed -i -e "/^ *image:\$/,/^ *pullPolicy:/{s|^\( *\)repository: .*\$|\1repository: $registry/manager|;s|^\( *\)tag: \"\"\$|\1tag: \"$version\"|;s|^\( *\)digest: \"\"\$|\1digest: \"$manager_digest\"|}" \
  "$tmp/chart/values.yaml"
"$helm" template sidecarops "$tmp/chart" --namespace sidecarops-system | grep -qF "image: $image_ref" ||
  die "the packaged chart does not render the image $image_ref (values.yaml's image repository/tag/digest lines changed?)"
"$helm" package "$tmp/chart" --version "$chart_version" --app-version "$version" --destination "$out" >/dev/null
# helm package stamps the archive with the current time; repack it with the commit's.
mkdir "$tmp/pkg"
tar -xzf "$out/sidecarops-$chart_version.tgz" -C "$tmp/pkg"
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner -C "$tmp/pkg" -cf - sidecarops |
  gzip -n -9 > "$out/sidecarops-$chart_version.tgz"

"$go" -C hack/release build -o "$tmp/release" .

echo "chart as OCI"
"$tmp/release" chart --chart "$out/sidecarops-$chart_version.tgz" --registry "$registry" \
  --epoch "$SOURCE_DATE_EPOCH" --out "$tmp/chart-oci" >/dev/null
archive "$tmp/chart-oci" "$out/sidecarops-chart-$chart_version.oci.tar"

echo "SBOMs and signatures"
key=${COSIGN_KEY:-}
[[ -z $key || -f $key ]] || die "COSIGN_KEY=$key: no such file"
sign=()
[[ -z $key ]] || sign=(--key "$key" --public-key-out "$out/cosign.pub")
for image in manager agent; do
  "$tmp/release" attach --layout "$tmp/images/$image" --repository "$registry/$image" \
    --sbom "$out/sidecarops-$image-$version.cdx.json" --out "$tmp/attach-$image" "${sign[@]}"
  if [[ -n $key ]]; then
    "$tmp/release" verify --layout "$tmp/images/$image" --repository "$registry/$image" \
      --attachments "$tmp/attach-$image" --key "$out/cosign.pub" >/dev/null
  fi
  archive "$tmp/attach-$image" "$out/sidecarops-$image-$version.cosign.oci.tar"
done
[[ -n $key ]] || echo "release: COSIGN_KEY is not set: the images are UNSIGNED (their SBOMs are attached unsigned)" >&2

echo "install.yaml"
overlay=dist/release/.overlay
rm -rf "$overlay"
mkdir -p "$overlay"
cat > "$overlay/kustomization.yaml" <<EOF
resources:
  - ../../../config/default
images:
  - name: ghcr.io/sidecarops/manager
    newName: $registry/manager
    newTag: $version
    digest: $manager_digest
EOF
kubectl kustomize "$overlay" > "$out/install.yaml"
rm -rf "$overlay"
grep -qF "image: $image_ref" "$out/install.yaml" || die "install.yaml does not name $image_ref"

cp CHANGELOG.md "$out/"
(cd "$out" && sha256sum -- * > SHA256SUMS)
echo "release $version of $commit in $out:"
ls -l "$out"
