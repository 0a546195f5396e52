#!/usr/bin/env bash
# Builds the container image (cmd/vsphere-federated-ccm/Containerfile) for
# linux/amd64 and linux/arm64 without a Docker daemon, with Debian's
# buildah (installed with apt when missing; as root), and writes it as an
# OCI archive holding an image index. Two builds of one commit on one
# machine give the same digest: static binaries built with -trimpath,
# fixed file modes, every timestamp 0.
#
# Usage: test/image.sh [OUT]   (default .cache/image/vsphere-federated-ccm.oci.tar)
# Prints OUT, and the index digest on stderr. When OUT exists and was built
# from the same inputs (sources, go.mod/go.sum, Containerfile, LICENSE, CA
# bundle, version, Go and buildah versions: OUT.inputs), it is reused;
# FORCE=1 rebuilds. PUSH=registry.example.com/vsphere-federated-ccm:TAG
# also pushes the index (both platforms) there with buildah's credentials
# (buildah login); any buildah transport works too, e.g. PUSH=oci:/tmp/img.
# Or later: skopeo copy --all oci-archive:OUT docker://registry/...:TAG
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
out=${1:-$repo/.cache/image/vsphere-federated-ccm.oci.tar}
version=${VERSION:-$(git -C "$repo" describe --tags --always --dirty 2>/dev/null || echo devel)}
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
log() { printf 'image: %s\n' "$*" >&2; }

need() { # command package
	command -v "$1" >/dev/null 2>&1 && return 0
	[[ $(id -u) == 0 ]] || { log "error: $1 is missing; install $2 (apt-get install $2)"; exit 1; }
	log "installing $2 with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq </dev/null >&2
	apt-get install -y -qq "$2" </dev/null >&2
}
need buildah buildah
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || need update-ca-certificates ca-certificates

# The build's inputs, hashed: the same inputs give the same image.
inputs() {
	printf 'version %s\nrevision %s\n%s\n%s\n' "$version" "$revision" "$(go version)" "$(buildah --version)"
	sha256sum /etc/ssl/certs/ca-certificates.crt | cut -d' ' -f1
	(cd "$repo" && git ls-files -co --exclude-standard -z -- '*.go' go.mod go.sum LICENSE cmd/vsphere-federated-ccm/Containerfile |
		sort -z | xargs -0 sha256sum)
}
key=$(inputs | sha256sum | cut -d' ' -f1)
push=${PUSH:-}
if [[ -n $push && $push != *:*/* && $push != oci:* && $push != oci-archive:* && $push != dir:* ]]; then
	push=docker://$push
fi
if [[ -z ${FORCE:-} && -z $push && -f $out && -f $out.inputs && $(cat "$out.inputs") == "$key" ]]; then
	log "reusing $out (built from the same inputs, $key; FORCE=1 rebuilds)"
	echo "$out"
	exit 0
fi

ctx=$(mktemp -d)
name=localhost/vsphere-federated-ccm-build-$$
bh=(buildah --storage-driver vfs)
cleanup() { "${bh[@]}" manifest rm "$name" >/dev/null 2>&1 || true; rm -rf "$ctx"; }
trap cleanup EXIT

for arch in amd64 arm64; do
	root=$ctx/rootfs-$arch
	mkdir -p "$root/bin" "$root/etc/ssl/certs"
	log "building the linux/$arch binary ($version)"
	(cd "$repo" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X main.version=$version -X main.commit=$revision" \
		-o "$root/vsphere-federated-ccm" ./cmd/vsphere-federated-ccm)
	ln -s ../vsphere-federated-ccm "$root/bin/vsphere-cloud-controller-manager"
	cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
	cp "$repo/LICENSE" "$root/LICENSE"
	chmod 0555 "$root/vsphere-federated-ccm"
	chmod 0444 "$root/etc/ssl/certs/ca-certificates.crt" "$root/LICENSE"
	chmod 0755 "$root" "$root/bin" "$root/etc" "$root/etc/ssl" "$root/etc/ssl/certs"
done

"${bh[@]}" manifest create "$name" >/dev/null
for arch in amd64 arm64; do
	log "building the linux/$arch image"
	"${bh[@]}" bud --quiet --isolation chroot --timestamp 0 --platform "linux/$arch" \
		--build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
		--manifest "$name" -f "$repo/cmd/vsphere-federated-ccm/Containerfile" "$ctx" >/dev/null
done
mkdir -p "$(dirname "$out")"
rm -f "$out" "$out.inputs"
"${bh[@]}" manifest push --quiet --all "$name" "oci-archive:$out" >/dev/null
if [[ -n $push ]]; then
	log "pushing to $push"
	"${bh[@]}" manifest push --quiet --all "$name" "$push" >/dev/null
fi
# Leave no image layers behind in the vfs store (each build is a full copy).
for id in $("${bh[@]}" manifest inspect "$name" 2>/dev/null | grep -o '"digest": "sha256:[0-9a-f]*"' | cut -d'"' -f4); do
	"${bh[@]}" rmi "$id" >/dev/null 2>&1 || true
done
echo "$key" >"$out.inputs"
digest=$(tar -xOf "$out" index.json | grep -o 'sha256:[0-9a-f]*' | head -1)
log "wrote $out ($(du -h "$out" | cut -f1)), index $digest"
echo "$out"
