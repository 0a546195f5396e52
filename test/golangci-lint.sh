#!/usr/bin/env bash
# Prints the path of a golangci-lint binary at the pinned version, built
# from the Go module proxy (no prebuilt download) into
# <repo>/.cache/bin/golangci-lint-<version>/ on first use and reused after.
#
# Usage: LINT=$(test/golangci-lint.sh); "$LINT" run --config test/golangci.yml ./...
set -euo pipefail
GOLANGCI_LINT_VERSION=v2.15.0
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
dir=$repo/.cache/bin/golangci-lint-$GOLANGCI_LINT_VERSION
if [[ ! -x $dir/golangci-lint ]]; then
	printf 'golangci-lint: building %s from the Go module proxy into %s\n' "$GOLANGCI_LINT_VERSION" "$dir" >&2
	mkdir -p "$dir"
	(cd "$repo" && GOBIN=$dir GOFLAGS=-mod=mod go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION") >&2
fi
echo "$dir/golangci-lint"
