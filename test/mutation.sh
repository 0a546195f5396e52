#!/usr/bin/env bash
# Mutation test of the absence decision (on demand; not part of test/all.sh
# or CI): go-gremlins mutates every non-test file of package discovery and,
# under cloud/, history.go and instances/instances.go (InstanceExists), and
# runs the tests against every mutant: discovery's own, and for cloud every
# test under cloud/ (the Rule 1 tests that drive the whole provider are in
# package cloud, not beside instances.go). A mutant the tests pass with
# LIVED.
#
#   test/mutation.sh                 # both packages (~1 h on 2 cores)
#   test/mutation.sh discovery       # or: cloud
#   WORKERS=2 test/mutation.sh       # parallel mutants (default 1)
#   MUTATION_FULL=1 test/mutation.sh cloud
#   GREMLINS_FLAGS=--dry-run test/mutation.sh   # list the mutants only
#
# It runs in a copy of the working tree (uncommitted changes included) in a
# temporary directory: no mutant ever touches this tree. gremlins is
# installed into .cache/bin when missing. Results (JSON, one per package)
# go to .cache/mutation/.
#
# cloud's whole suite takes ~2 min per mutant, so by default the mutants of
# cloud are run against its tests but the 16 that take a second or more
# (mostly vcsim and the Rule 1 model: 111 of its 125 s); MUTATION_FULL=1
# runs them too, with the Rule 1 model cut to 20 sequences of 20 steps
# (RAPID_CHECKS, RAPID_STEPS). GOFLAGS=-count=1 keeps go test from serving
# gremlins' coverage run from its cache (the per-mutant timeout is derived
# from that run's duration).
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)
version=v0.6.0
bin="$root/.cache/bin/gremlins"
if ! go version -m "$bin" 2>/dev/null | grep -q "github.com/go-gremlins/gremlins[[:space:]]*$version"; then
	echo "installing gremlins $version into .cache/bin" >&2
	GOBIN="$root/.cache/bin" go install "github.com/go-gremlins/gremlins/cmd/gremlins@$version"
fi

scopes=("$@")
[ ${#scopes[@]} -gt 0 ] || scopes=(discovery cloud)
workers=${WORKERS:-1}
out="$root/.cache/mutation"
mkdir -p "$out"

slow='^(TestRule1Model|TestRule1ModelVCsim|TestLegacyLabelWhileTheCutoffIsUnknown|TestBlackholedVCenterIsAnErrorNeverAbsence|TestRemovedVCenterKeepsItsNodesAcrossARestart|TestSlowVCenterHitsTheDeadline|TestReimagedVCenterKeepsItsNodes|TestDownVCenterAnswersWithoutRequests|TestStoppedVCenterIsAnErrorNeverAbsence|TestLegacyCutoffIsWrittenOnceAndKept|TestZoneLabels|TestInstanceMetadataByGuestHostNameOrIP|TestEntriesOfOneServerReimagedWhileOneIsDown|TestConfigEditsApplyInPlace|TestPreparedStandbyStartsBackendsAndWritesNothing|TestExistsAndShutdownFollowTheVM)$'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for scope in "${scopes[@]}"; do
	# A fresh copy per scope: the cloud scope removes tests from its own.
	rm -rf "${work:?}/$scope" && mkdir "$work/$scope"
	cd "$root" && tar --exclude=./.git --exclude=./.cache -cf - . | tar -C "$work/$scope" -xf -
	cd "$work/$scope"
	args=(unleash --workers "$workers" --timeout-coefficient 3 -o "$out/$scope.json")
	# shellcheck disable=SC2206 # extra flags, split as given
	[ -z "${GREMLINS_FLAGS:-}" ] || args+=(${GREMLINS_FLAGS})
	goflags="-count=1"
	case "$scope" in
	discovery) ;;
	cloud)
		# cloud: every file but the two in scope is left unmutated (gremlins
		# matches paths below the scope's folder).
		others=$(cd cloud && find . -name '*.go' ! -name '*_test.go' ! -path ./history.go ! -path ./instances/instances.go -printf '%P\n' |
			sed 's/\./\\./g' | sort | paste -sd'|')
		# A mutant is tested by every test under cloud/: gremlins' integration
		# mode runs `go test ./...` from the module's root, so this copy keeps
		# no other test, and coverage counts across cloud's packages.
		args+=(-E "^($others)\$" --integration --coverpkg ./cloud/...)
		find . -name '*_test.go' ! -path './cloud/*' -delete
		if [ "${MUTATION_FULL:-0}" = 1 ]; then
			export RAPID_CHECKS=${RAPID_CHECKS:-20} RAPID_STEPS=${RAPID_STEPS:-20}
		else
			goflags="$goflags -skip=$slow"
		fi
		;;
	*)
		echo "unknown scope $scope (discovery or cloud)" >&2
		exit 2
		;;
	esac
	echo "== $scope: gremlins ${args[*]} $scope (GOFLAGS=$goflags)" >&2
	start=$(date +%s)
	GOFLAGS="$goflags" nice -n 10 "$bin" "${args[@]}" "$scope" | tee "$out/$scope.txt" | { grep -v '^ *KILLED ' || true; }
	echo "== $scope: $(($(date +%s) - start)) s; results in .cache/mutation/$scope.{txt,json}" >&2
done
