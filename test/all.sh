#!/usr/bin/env bash
# Runs every test of vsphere-federated-ccm: formatting and vet, the unit
# tests (against govmomi's simulator) with the race detector, a short run of
# each fuzz target, and the e2e suite on a real kube-apiserver + etcd built
# from the Go module proxy (first run: ~7 min to build them, cached after),
# its short scenarios also on the older Kubernetes minors of test/tools/v*
# (first run: a few minutes more each).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n=== %s\n' "$*"; }

step "provision kube-apiserver and etcd"
KUBEBUILDER_ASSETS=$(test/provision.sh)
export KUBEBUILDER_ASSETS
# The older minors e2e TestKubernetesVersions runs on, built here, one after
# another, while nothing else runs (each build takes both cores).
minors=$(test/provision.sh --versions)
for minor in $minors; do
	dir=$(test/provision.sh "$minor")
	printf 'Kubernetes %s: %s\n' "$minor" "$dir"
done

step "gofmt and go vet"
unformatted=$(git ls-files -co --exclude-standard '*.go' | xargs gofmt -l)
if [[ -n $unformatted ]]; then
	printf 'gofmt would change:\n%s\n' "$unformatted"
	exit 1
fi
go vet ./...

step "go.mod and go.sum are tidy"
go mod tidy -diff

step "golangci-lint (test/golangci.yml: depguard keeps govmomi in backends/vsphere and the imports one-way)"
LINT=$(test/golangci-lint.sh)
"$LINT" run --config test/golangci.yml ./...

step "unit tests (race detector)"
go test -race -count=1 -timeout 20m $(go list ./... | grep -v /test/e2e)

# Timings against a baseline or a round trip mean nothing under the race
# detector (those tests skip themselves there): run them without it.
step "timing tests, without the race detector"
go test -count=1 -run '^(TestDeadVCenterCostsTheOthersNothing|TestSlowVCenterIsWaitedForOnFirstLookups)$' ./cloud/

# Once each: a benchmark no test runs rots unseen (BenchmarkFollowVMs did).
# The numbers come from -benchtime runs on demand (test/README.md).
step "benchmarks, one iteration each"
go test -run '^$' -bench . -benchtime 1x $(go list ./... | grep -v -e /test/e2e -e /test/bench)

step "Helm chart: lint, render, and the manifests are its rendering"
HELM=$(test/helm.sh)
export HELM
"$HELM" lint --strict manifests/chart
for values in manifests/chart/values.yaml manifests/chart/ci/*-values.yaml; do
	"$HELM" lint --strict manifests/chart -f "$values"
	"$HELM" template vsphere-federated-ccm manifests/chart --namespace kube-system -f "$values" >/dev/null
done
manifests/render.sh --check

# Counts, not durations: with a duration, Go's fuzz coordinator can report
# its own deadline as a failure (golang/go#75804, fixed in Go 1.27). FUZZTIME
# overrides both (a count such as 1000000x, or a duration).
step "fuzzing, ${FUZZTIME:-150000x and 50000x executions}"
go test -run '^$' -fuzz '^FuzzParse$' -fuzztime "${FUZZTIME:-150000x}" ./config/
go test -run '^$' -fuzz '^FuzzParseProviderID$' -fuzztime "${FUZZTIME:-50000x}" ./discovery/

step "container image: linux/amd64 + linux/arm64 with buildah (tested in e2e TestImage)"
E2E_IMAGE=$(test/image.sh)
export E2E_IMAGE

step "e2e: real kube-apiserver, simulated vCenters, the built CCM"
go test -count=1 -timeout 40m -v ./test/e2e/
