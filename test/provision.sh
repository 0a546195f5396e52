#!/usr/bin/env bash
# Provisions the real control-plane binaries used by the envtest-based tests:
# kube-apiserver and etcd, built from source fetched through the Go module
# proxy only (no prebuilt downloads). The pinned versions live in the builder
# modules test/tools/kube-apiserver and test/tools/etcd. The default
# invocation also builds the node side: kube-controller-manager
# (test/tools/kube-controller-manager) and vm-kubelet, the real kubelet of a
# simulated VM (test/tools/vm-kubelet, our own main.go).
#
# Usage: KUBEBUILDER_ASSETS=$(test/provision.sh)
#        test/provision.sh <minor>    e.g. 1.33: an older Kubernetes
#        test/provision.sh --versions the older minors there are builders for
#
# The binaries are cached in <repo>/.cache/bin with a stamp of the builder
# modules' go.mod/go.sum (and vm-kubelet's Go files); when every binary is
# present and the stamp matches, the script prints the directory and exits
# at once. Concurrent runs are serialised with flock. Progress goes to
# stderr; the only line on stdout is the bin directory.
#
# An older minor (TestKubernetesVersions) has its own builder modules,
# test/tools/v<minor>/kube-apiserver and .../etcd (the etcd that release's
# build/dependencies.yaml names), whose go.mod give the versions; it is
# cached in <repo>/.cache/kube/v<minor> with its own stamp and lock, apart
# from .cache/bin. It builds kube-apiserver and etcd only.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cache=$repo/.cache

if [[ ${1-} == --versions ]]; then
	for d in "$repo"/test/tools/v*/; do
		[[ -f $d/kube-apiserver/go.mod && -f $d/etcd/go.mod ]] || continue
		d=${d%/}
		echo "${d##*/v}"
	done | sort -V
	exit 0
fi

# required_version prints the version a builder module's go.mod requires of
# a module.
required_version() { # go.mod module
	awk -v m="$2" '($1 == m && $2 ~ /^v/) || ($1 == "require" && $2 == m) { print ($1 == "require" ? $3 : $2); exit }' "$1"
}

if [[ $# -eq 0 ]]; then
	KUBE_VERSION=v1.37.1
	ETCD_VERSION=v3.7.3
	tools=$repo/test/tools
	bin=$cache/bin
	lock=$cache/provision.lock
	builds=$cache/build
	# Built with kube-apiserver's release and ldflags, from their own
	# builder modules.
	node_tools=(kube-controller-manager vm-kubelet)
elif [[ $# -eq 1 && $1 =~ ^1\.[0-9]+$ ]]; then
	tools=$repo/test/tools/v$1
	if [[ ! -f $tools/kube-apiserver/go.mod || ! -f $tools/etcd/go.mod ]]; then
		printf 'provision: no builder modules for Kubernetes %s in %s (have: %s)\n' "$1" "$tools" "$("$0" --versions | tr '\n' ' ')" >&2
		exit 2
	fi
	KUBE_VERSION=$(required_version "$tools/kube-apiserver/go.mod" k8s.io/kubernetes)
	ETCD_VERSION=$(required_version "$tools/etcd/go.mod" go.etcd.io/etcd/server/v3)
	[[ $KUBE_VERSION == v$1.* ]] || { printf 'provision: %s requires k8s.io/kubernetes %s, not a %s release\n' "$tools/kube-apiserver/go.mod" "$KUBE_VERSION" "$1" >&2; exit 2; }
	[[ -n $ETCD_VERSION ]] || { printf 'provision: %s requires no go.etcd.io/etcd/server/v3\n' "$tools/etcd/go.mod" >&2; exit 2; }
	bin=$cache/kube/v$1
	lock=$cache/kube/v$1.lock
	builds=$cache/kube/build-v$1
	node_tools=()
else
	printf 'usage: %s [<minor> | --versions]   (minor: e.g. 1.33)\n' "$0" >&2
	exit 2
fi
stamp=$bin/.stamp

log() { printf 'provision: %s\n' "$*" >&2; }

# One stamp line per binary: its name, its version and a hash of its builder
# module files. Changing either builder only rebuilds that binary.
stamp_line() { # name version [more files to hash]
	local name=$1 version=$2 hash
	shift 2
	hash=$(cat "$tools/$name/go.mod" "$tools/$name/go.sum" "$@" | sha256sum | cut -d' ' -f1)
	printf '%s %s %s\n' "$name" "$version" "$hash"
}

want_kube=$(stamp_line kube-apiserver "$KUBE_VERSION")
want_etcd=$(stamp_line etcd "$ETCD_VERSION")
declare -A want_node=()
for name in "${node_tools[@]}"; do
	case $name in
	# Our own code: a change to it must rebuild the binary.
	vm-kubelet) want_node[$name]=$(stamp_line "$name" "$KUBE_VERSION" "$tools/$name"/*.go) ;;
	*) want_node[$name]=$(stamp_line "$name" "$KUBE_VERSION") ;;
	esac
done

have_line() { # line
	[[ -f $stamp ]] && grep -qxF "$1" "$stamp"
}

node_tool_up_to_date() { # name
	[[ -x $bin/$1 ]] && have_line "${want_node[$1]}"
}

up_to_date() {
	[[ -x $bin/kube-apiserver && -x $bin/etcd ]] && have_line "$want_kube" && have_line "$want_etcd" || return 1
	local name
	for name in "${node_tools[@]}"; do
		node_tool_up_to_date "$name" || return 1
	done
}

if up_to_date; then
	echo "$bin"
	exit 0
fi

ensure_flock() {
	command -v flock >/dev/null 2>&1 && return 0
	log "flock not found; installing util-linux with apt-get"
	local sudo=()
	if [[ $(id -u) != 0 ]]; then
		command -v sudo >/dev/null 2>&1 || { log "error: flock is missing and not root (no sudo) to install util-linux"; exit 1; }
		sudo=(sudo -n)
	fi
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq </dev/null >&2
	"${sudo[@]}" apt-get install -y -qq util-linux </dev/null >&2
	command -v flock >/dev/null 2>&1 || { log "error: flock still missing after installing util-linux"; exit 1; }
}

command -v go >/dev/null 2>&1 || { log "error: the go command is required"; exit 1; }
ensure_flock

mkdir -p "$bin"
mkdir -p "$(dirname "$lock")"
exec 9>"$lock"
if ! flock -n 9; then
	log "another provision run holds $lock; waiting for it to finish..."
	flock 9
fi

# The other run may have built everything while we waited.
if up_to_date; then
	log "binaries are up to date in $bin"
	echo "$bin"
	exit 0
fi

# Holding the lock, no other run is building: clear leftovers of killed runs.
rm -rf "$builds".*
tmp=$(mktemp -d "$builds.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Deterministic settings for the builder modules, whatever the caller's
# environment: no go.work, go.mod/go.sum must already be complete, no VCS
# stamping (the builders live inside this repository's work tree).
export GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0

# build_kube builds a Kubernetes binary from its builder module with the
# release's version stamped in, as the Kubernetes build does.
build_kube() { # name package
	local major minor ldflags=() key val
	major=${KUBE_VERSION#v}
	major=${major%%.*}
	minor=${KUBE_VERSION#v*.}
	minor=${minor%%.*}
	for kv in "gitVersion=$KUBE_VERSION" "gitMajor=$major" "gitMinor=$minor" "gitTreeState=clean"; do
		key=${kv%%=*}
		val=${kv#*=}
		ldflags+=("-X k8s.io/component-base/version.$key=$val" "-X k8s.io/client-go/pkg/version.$key=$val")
	done
	(cd "$tools/$1" &&
		go build -trimpath -ldflags "-s -w ${ldflags[*]}" -o "$tmp/$1" "$2")
}

build_kube_apiserver() {
	log "building kube-apiserver $KUBE_VERSION from the Go module proxy (first time: ~5 min, ~2.5 GB memory)..."
	build_kube kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
}

build_node_tool() { # name
	local t=$SECONDS
	case $1 in
	kube-controller-manager)
		log "building kube-controller-manager $KUBE_VERSION from the Go module proxy (first time: ~1 min after kube-apiserver, whose packages it shares; ~5 min alone)..."
		build_kube kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
		;;
	vm-kubelet)
		log "building vm-kubelet (the kubelet of $KUBE_VERSION with a fake runtime) from the Go module proxy (first time: ~1 min after kube-apiserver and kube-controller-manager; a change to main.go: ~10 s)..."
		build_kube vm-kubelet .
		;;
	*)
		log "error: no build for $1"
		return 1
		;;
	esac
	log "built $1 in $((SECONDS - t))s"
}

build_etcd() {
	log "building etcd $ETCD_VERSION from the Go module proxy (first time: ~1 min)..."
	(cd "$tools/etcd" &&
		go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
}

# Records a freshly built binary in the stamp, keeping the other's line.
record() { # name line
	{ [[ -f $stamp ]] && grep -v "^$1 " "$stamp" || true; printf '%s\n' "$2"; } >"$tmp/stamp"
	mv -f "$tmp/stamp" "$stamp"
}

start=$SECONDS
if [[ -x $bin/kube-apiserver ]] && have_line "$want_kube"; then
	log "kube-apiserver $KUBE_VERSION is up to date"
else
	build_kube_apiserver
	mv -f "$tmp/kube-apiserver" "$bin/kube-apiserver"
	record kube-apiserver "$want_kube"
fi

if [[ -x $bin/etcd ]] && have_line "$want_etcd"; then
	log "etcd $ETCD_VERSION is up to date"
else
	build_etcd
	mv -f "$tmp/etcd" "$bin/etcd"
	record etcd "$want_etcd"
fi

for name in "${node_tools[@]}"; do
	if node_tool_up_to_date "$name"; then
		log "$name $KUBE_VERSION is up to date"
	else
		build_node_tool "$name"
		mv -f "$tmp/$name" "$bin/$name"
		record "$name" "${want_node[$name]}"
	fi
done

log "done in $((SECONDS - start))s: $bin"
echo "$bin"
