#!/usr/bin/env bash
# Renders the chart (manifests/chart) with its default values into the
# plain manifests `kubectl apply -k manifests/` uses: one source of truth.
# With --check, writes nothing and fails when a manifest differs from its
# rendering (CI runs that).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
helm=${HELM:-$(../test/helm.sh)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$helm" template vsphere-federated-ccm chart --namespace kube-system | awk -v out="$out" '
	/^# Source: vsphere-federated-ccm\/templates\// {
		n = $3; sub(/.*\//, "", n); file = out "/" n
		if (!(file in seen)) {
			seen[file] = 1
			print "# Rendered from manifests/chart by manifests/render.sh: edit the chart, not this file." > file
		} else {
			print "---" > file
		}
		next
	}
	/^---$/ { next }
	file != "" { print > file }
'
status=0
for f in "$out"/*.yaml; do
	name=$(basename "$f")
	if [[ ${1:-} == --check ]]; then
		if ! diff -u "$name" "$f"; then
			printf 'manifests/%s differs from the chart'"'"'s rendering: run manifests/render.sh\n' "$name" >&2
			status=1
		fi
	else
		cp "$f" "$name"
	fi
done
exit $status
