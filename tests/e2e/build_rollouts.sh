#!/usr/bin/env bash
# Builds the Argo Rollouts controller (github.com/argoproj/argo-rollouts, cmd/rollouts-controller)
# for the e2e tier from the wrapper module tests/e2e/gomod/rollouts, into
# $E2E_CACHE/argo-rollouts (default ~/.cache/poolguard-e2e/v1.37.2/argo-rollouts), with the
# module's CRDs (manifests/crds) and ClusterRole (manifests/role) beside the binary.
# tests/e2e/build.sh starts it after the control plane; it has its own lock and stamp, so a
# control plane rebuild (another wrapper module changed) never invalidates it, nor it them.
#
# The module's go.mod asks for Go 1.26.10: the go command fetches the toolchain named below
# from the module proxy (GOTOOLCHAIN) when the machine's Go is older. A different toolchain
# shares no compiled package with the control plane's build (the build cache is keyed by the
# compiler), and the module pins k8s.io v0.34.5 anyway: with an empty Go cache this is a
# build of its own, about 1,700 packages.
#
# With --manifests it only puts the CRDs and the ClusterRole in place (seconds, under their
# own lock and stamp): `make e2e` installs the CRDs before poolguard starts, while the binary
# still builds beside the first tests.
set -euo pipefail

ROLLOUTS_MODULE=github.com/argoproj/argo-rollouts@v1.10.2
TOOLCHAIN=go1.27.3
here=$(cd "$(dirname "$0")" && pwd)
cache=${E2E_CACHE:-$HOME/.cache/poolguard-e2e/v1.37.2}
out=$cache/argo-rollouts
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=$TOOLCHAIN
export GOGC=${GOGC:-off}  # as build.sh: a fifth less compiler CPU, not in the cache key
gcflags="all=-N -l"  # as build_kruise.sh: a fifth less compiler CPU again
# the version its log and --version print (upstream's Makefile sets the same variables)
ldflags="-s -w -X github.com/argoproj/argo-rollouts/utils/version.version=${ROLLOUTS_MODULE#*@v}"
ldflags+=" -X github.com/argoproj/argo-rollouts/utils/version.gitTag=${ROLLOUTS_MODULE#*@}"

if ! command -v go >/dev/null 2>&1; then
    if [ -x /usr/local/go/bin/go ]; then
        export PATH=/usr/local/go/bin:$PATH
    else
        echo "error: the e2e tier builds Argo Rollouts with Go, and 'go' is not on PATH" >&2
        exit 2
    fi
fi

stamp_text() {
    {
        echo "$TOOLCHAIN $gcflags $ldflags"
        cat "$here/gomod/rollouts/go.mod" "$here/gomod/rollouts/go.sum"
    } | sha256sum | cut -d' ' -f1
}

manifests_current() {
    [ -f "$out/.manifests-stamp" ] && [ "$(cat "$out/.manifests-stamp")" = "$(stamp_text)" ] \
        && [ -f "$out/crds/rollout-crd.yaml" ] && [ -f "$out/role/argo-rollouts-clusterrole.yaml" ]
}

up_to_date() {
    [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$(stamp_text)" ] \
        && [ -x "$out/rollouts-controller" ] && manifests_current
}

# The module's CRDs and ClusterRole, from the module proxy, unless in place already.
manifests() {
    exec 7>"$out/manifests.lock"
    flock 7
    if ! manifests_current; then
        local module_dir
        module_dir=$(cd "$here/gomod/rollouts" && go mod download -json "$ROLLOUTS_MODULE" \
            | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
        rm -rf "$out/crds" "$out/role" && mkdir -p "$out/crds" "$out/role"
        cp "$module_dir"/manifests/crds/*-crd.yaml "$out/crds/"
        cp "$module_dir"/manifests/role/argo-rollouts-clusterrole.yaml "$out/role/"
        chmod -R u+w "$out/crds" "$out/role"
        stamp_text > "$out/.manifests-stamp"
    fi
    flock -u 7
}

mkdir -p "$out"
if [ "${1:-}" = --manifests ]; then
    manifests
    echo "e2e: Argo Rollouts CRDs and ClusterRole in $out"
    exit 0
fi
exec 9>"$out/build.lock"
flock 9
if up_to_date; then
    echo "e2e: Argo Rollouts controller up to date in $out"
    exit 0
fi
echo "e2e: building the Argo Rollouts controller ($ROLLOUTS_MODULE, $TOOLCHAIN) into $out:"
echo "e2e: with an empty Go cache about 600 CPU seconds (5-6 minutes on 2 free cores), 35 s warm"
start=$(date +%s)
rm -f "$out/.stamp"
(cd "$here/gomod/rollouts" && go build -trimpath -gcflags "$gcflags" -ldflags "$ldflags" \
    -o "$out/rollouts-controller" github.com/argoproj/argo-rollouts/cmd/rollouts-controller)
manifests
stamp_text > "$out/.stamp"
echo "e2e: built the Argo Rollouts controller in $(( $(date +%s) - start ))s"
