#!/usr/bin/env bash
# Prints the path of a helm binary at the pinned version, built from the Go
# module proxy (no prebuilt download) into <repo>/.cache/bin/helm-<version>/
# on first use and reused after.
#
# Usage: HELM=$(test/helm.sh)
set -euo pipefail
HELM_VERSION=v3.22.0
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
dir=$repo/.cache/bin/helm-$HELM_VERSION
if [[ ! -x $dir/helm ]]; then
	printf 'helm: building %s from the Go module proxy into %s\n' "$HELM_VERSION" "$dir" >&2
	mkdir -p "$dir"
	(cd "$repo" && GOBIN=$dir GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION") >&2
fi
echo "$dir/helm"
