#!/usr/bin/env bash
# Builds the local control plane for the e2e tier, once, outside the repository:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (k8s.io/kubernetes)
#   etcd (go.etcd.io/etcd/server/v3) and the LeaderWorkerSet controller (sigs.k8s.io/lws),
#   from the wrapper modules in tests/e2e/gomod, into $E2E_CACHE/bin (default
#   ~/.cache/poolguard-e2e/v1.37.2/bin); the LeaderWorkerSet CRDs and RBAC from its module
#   into $E2E_CACHE/lws. Then tests/e2e/build_rollouts.sh (the Argo Rollouts controller, its
#   own toolchain, lock and stamp).
# Modules come from the Go module proxy only; nothing is vendored, no binary committed.
# A stamp (hash of the wrapper modules, the Go version and the flags) skips the build when
# the binaries match; otherwise `go build` runs (incremental with a warm GOCACHE).
# Then tests/e2e/build_kruise.sh builds the CloneSet controller, under its own stamp and lock.
# With --control-plane it stops after the control plane: `make e2e` (tests/e2e/run.sh) builds
# the CloneSet and Argo Rollouts controllers beside the first tests instead.
set -euo pipefail
only_control_plane=0
[ "${1:-}" = --control-plane ] && only_control_plane=1

K8S_VERSION=v1.37.2
here=$(cd "$(dirname "$0")" && pwd)
cache=${E2E_CACHE:-$HOME/.cache/poolguard-e2e/$K8S_VERSION}
bin=$cache/bin
binaries=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd lws-controller)
LWS_MODULE=sigs.k8s.io/lws@v0.9.0
lws=$cache/lws
# The same flags as every earlier build, so the Go build cache is shared.
k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
k8s_ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# The compiler without garbage collection: about a fifth less CPU for a cold build (measured
# on k8s.io/client-go: 217 -> 172 CPU seconds) for at most ~1 GB more per compile process.
# GOGC is not part of the build cache's key, so warm caches stay valid.
export GOGC=${GOGC:-off}

if ! command -v go >/dev/null 2>&1; then
    if [ -x /usr/local/go/bin/go ]; then
        export PATH=/usr/local/go/bin:$PATH
    else
        echo "error: the e2e tier builds Kubernetes with Go 1.26+, and 'go' is not on PATH" >&2
        exit 2
    fi
fi

stamp_text() {
    {
        go version
        echo "$k8s_ldflags"
        cat "$here/gomod/k8s/go.mod" "$here/gomod/k8s/go.sum" \
            "$here/gomod/etcd/go.mod" "$here/gomod/etcd/go.sum" \
            "$here/gomod/lws/go.mod" "$here/gomod/lws/go.sum"
    } | sha256sum | cut -d' ' -f1
}

up_to_date() {
    [ -f "$bin/.stamp" ] && [ "$(cat "$bin/.stamp")" = "$(stamp_text)" ] || return 1
    for b in "${binaries[@]}"; do [ -x "$bin/$b" ] || return 1; done
    [ -f "$lws/crd/leaderworkerset.x-k8s.io_leaderworkersets.yaml" ] || return 1
}

mkdir -p "$bin"
exec 9>"$cache/build.lock"
flock 9  # a second `make e2e` waits for the first build instead of racing it
if up_to_date; then
    echo "e2e: control plane binaries up to date in $bin"
    flock -u 9
    [ "$only_control_plane" = 1 ] && exit 0
    "$here/build_kruise.sh"
    exec "$here/build_rollouts.sh"
fi
# go build prints nothing until it is done: say what is being built and for how long.
echo "e2e: building the control plane $K8S_VERSION into $bin: with an empty Go cache about"
echo "e2e: 18 minutes on 2 cores beside make test (longer beside heavier work), minutes with a warm one"
start=$(date +%s)
echo "e2e: [1/3] kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (k8s.io/kubernetes $K8S_VERSION; most of the time)"
(cd "$here/gomod/k8s" && go build -trimpath -ldflags "$k8s_ldflags" -o "$bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
echo "e2e: [2/3] etcd (go.etcd.io/etcd/server/v3), after $(( $(date +%s) - start ))s"
(cd "$here/gomod/etcd" && go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3)
# Built against the same k8s.io modules as the control plane (its wrapper aligns them), so
# it reuses their compiled packages: about a minute on top of a warm cache.
echo "e2e: [3/3] the LeaderWorkerSet controller ($LWS_MODULE), after $(( $(date +%s) - start ))s"
(cd "$here/gomod/lws" && go build -trimpath -ldflags "-s -w" -o "$bin/lws-controller" sigs.k8s.io/lws/cmd)
# Its CRDs and RBAC come from the module itself (the e2e tier installs them).
module_dir=$(cd "$here/gomod/lws" && go mod download -json "$LWS_MODULE" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
rm -rf "$lws" && mkdir -p "$lws/crd" "$lws/rbac" "$lws/webhook"
cp "$module_dir"/config/crd/bases/*.yaml "$lws/crd/"
cp "$module_dir"/config/rbac/role.yaml "$lws/rbac/"
cp "$module_dir"/config/webhook/manifests.yaml "$lws/webhook/"
chmod -R u+w "$lws"
stamp_text > "$bin/.stamp"
echo "e2e: built in $(( $(date +%s) - start ))s: ${binaries[*]}"
flock -u 9
[ "$only_control_plane" = 1 ] && exit 0
"$here/build_kruise.sh"
exec "$here/build_rollouts.sh"
