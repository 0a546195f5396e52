#!/usr/bin/env bash
# Rebuilds the CPI samples folder (DIR: default $CPI_SAMPLES_DIR, else
# ../shared/cpi beside the repository; see test/cpisamples) from
# kubernetes/cloud-provider-vsphere ("CPI"). The repository holds no copy: the
# files are CPI's.
#
#   samples/      every cloud config CPI ships (Go test fixtures, docs,
#                 release manifests, the Helm chart rendered with
#                 helm-values/*), plus the credential Secret layouts;
#   SOURCES.md    where each sample comes from;
#   golden/       what CPI's own ReadCPIConfig reads from each sample.
#
# It reads DIR/helm-values/ and leaves DIR/release-v1.36/ alone. By hand
# only; not part of CI (test/all.sh does not call it). Run it from anywhere;
# relative paths in MIRROR and DIR are from the repository's root.
#
#   MIRROR=<CPI's git directory> [REV=<commit>] [DIR=<folder>] test/cpiconfig/regenerate.sh
#
# Needs: git, go, tar; CPI's repository as a (bare) git directory (MIRROR,
# required, read with `git show REV:path`, never built); the Go module proxy for CPI's
# module, sigs.k8s.io/yaml and helm. helm is built from the proxy at
# HELM_VERSION and cached in <repo>/.cache/bin/helm.
#
# The golden files come from CPI's module at the version pinned in
# test/cpiconfig/go.mod. The proxy does not serve a pseudo-version of the
# mirrored commit, so that is a release; the script refuses to run unless
# CPI's parser code and the versions of its YAML/INI libraries at REV are the
# same as in that module version (then the results are CPI's at REV).
set -euo pipefail

HELM_VERSION=v3.22.0
REV=${REV:-HEAD}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
cd "$repo"

log() { printf 'regenerate: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[[ -n ${MIRROR:-} ]] || die "set MIRROR to CPI's (bare) git directory"
DIR=${DIR:-${CPI_SAMPLES_DIR:-../shared/cpi}}
[[ -d $DIR/helm-values ]] || die "no $DIR/helm-values (set DIR to the CPI samples folder)"

git --git-dir="$MIRROR" rev-parse --verify --quiet "$REV^{commit}" >/dev/null ||
	die "no commit $REV in $MIRROR (set MIRROR and REV)"
commit=$(git --git-dir="$MIRROR" rev-parse "$REV^{commit}")
log "CPI at $commit"

# helm, pinned and cached.
bin=$repo/.cache/bin
helm=$bin/helm
have_helm() {
	[[ -x $helm ]] && go version -m "$helm" 2>/dev/null |
		grep -qE "^[[:space:]]+mod[[:space:]]+helm.sh/helm/v3[[:space:]]+$HELM_VERSION[[:space:]]"
}
if ! have_helm; then
	log "building helm $HELM_VERSION into $bin (a few minutes)"
	mkdir -p "$bin"
	GOBIN=$bin go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
	have_helm || die "$helm is not helm $HELM_VERSION"
fi

# CPI's module as pinned in go.mod, and the proof that it parses like REV.
cpi_version=$(go -C "$here" list -m -f '{{.Version}}' k8s.io/cloud-provider-vsphere)
cpi_dir=$(go -C "$here" list -m -f '{{.Dir}}' k8s.io/cloud-provider-vsphere)
[[ -n $cpi_dir && -d $cpi_dir ]] || { go -C "$here" mod download k8s.io/cloud-provider-vsphere; cpi_dir=$(go -C "$here" list -m -f '{{.Dir}}' k8s.io/cloud-provider-vsphere); }
log "CPI module k8s.io/cloud-provider-vsphere $cpi_version"
parser_paths=(pkg/common/config pkg/cloudprovider/vsphere/config pkg/common/connectionmanager)
drift=0
while IFS= read -r f; do
	if ! cmp -s <(git --git-dir="$MIRROR" show "$commit:$f") "$cpi_dir/$f"; then
		log "differs between $REV and module $cpi_version: $f"
		drift=1
	fi
done < <(git --git-dir="$MIRROR" ls-tree -r --name-only "$commit" -- "${parser_paths[@]}")
for m in gopkg.in/yaml.v2 gopkg.in/gcfg.v1 gopkg.in/warnings.v0; do
	want=$(git --git-dir="$MIRROR" show "$commit:go.mod" | awk -v m="$m" '$1 == m { print $2 }')
	have=$(go -C "$here" list -m -f '{{.Version}}' "$m")
	if [[ $want != "$have" ]]; then
		log "$m: CPI at $REV requires $want, test/cpiconfig resolves $have"
		drift=1
	fi
done
[[ $drift == 0 ]] || die "CPI's parser at $REV is not the one in module $cpi_version: pin a module version (or pseudo-version) of $REV in test/cpiconfig/go.mod"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go -C "$here" build -o "$tmp/extract" ./extract
go -C "$here" build -o "$tmp/cpiconfig" .

"$tmp/extract" -mirror "$MIRROR" -rev "$commit" -helm "$helm" \
	-helm-version "$HELM_VERSION" -cpi-module "k8s.io/cloud-provider-vsphere $cpi_version" \
	-out "$DIR/samples" -values "$DIR/helm-values" -sources "$DIR/SOURCES.md"
"$tmp/cpiconfig" -samples "$DIR/samples" -golden "$DIR/golden"
log "rewrote $DIR/samples, $DIR/golden and $DIR/SOURCES.md"
