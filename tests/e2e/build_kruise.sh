#!/usr/bin/env bash
# Builds OpenKruise's CloneSet controller for the e2e tier, once, outside the repository: the
# wrapper module tests/e2e/gomod/kruise (a main that starts only pkg/controller/cloneset of
# github.com/openkruise/kruise v1.8.0) into $E2E_CACHE/kruise/bin/cloneset-controller, and the
# module's CloneSet CRD and manager ClusterRole into $E2E_CACHE/kruise/{crd,rbac}.
# Its own stamp and lock: a change to the control plane's wrapper modules does not rebuild it,
# and a change to this one does not rebuild the control plane.
# It cannot share the control plane's compiled packages: kruise v1.8.0 is written against
# k8s.io/* v0.30 and controller-runtime v0.18 (its event handlers take the untyped workqueue
# that controller-runtime v0.19 replaced), so its wrapper keeps kruise's own versions.
set -euo pipefail

K8S_VERSION=v1.37.2
KRUISE_MODULE=github.com/openkruise/kruise@v1.8.0
here=$(cd "$(dirname "$0")" && pwd)
cache=${E2E_CACHE:-$HOME/.cache/poolguard-e2e/$K8S_VERSION}
out=$cache/kruise
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
export GOGC=${GOGC:-off}  # as tests/e2e/build.sh: less compiler CPU, same cache keys
# Without optimisation and inlining: a fifth less compiler CPU (measured on
# k8s.io/client-go/kubernetes: 280 -> 218 CPU seconds) for a controller whose own CPU use in
# the tests is small. Not for the control plane, whose API server works hard in the tests.
# The standard library is the exception: compiled as the control plane compiles it (no
# flags), the control plane's build has already put it in the Go build cache.
gcflags=(-gcflags "all=-N -l" -gcflags "std=")

if ! command -v go >/dev/null 2>&1; then
    if [ -x /usr/local/go/bin/go ]; then
        export PATH=/usr/local/go/bin:$PATH
    else
        echo "error: the e2e tier builds the CloneSet controller with Go 1.26+, and 'go' is not on PATH" >&2
        exit 2
    fi
fi

stamp_text() {
    { go version; echo "${gcflags[*]}"; cat "$here/gomod/kruise/go.mod" "$here/gomod/kruise/go.sum" \
        "$here/gomod/kruise/main.go"; } | sha256sum | cut -d' ' -f1
}

up_to_date() {
    [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$(stamp_text)" ] \
        && [ -x "$out/bin/cloneset-controller" ] \
        && [ -f "$out/crd/apps.kruise.io_clonesets.yaml" ] && [ -f "$out/rbac/role.yaml" ]
}

mkdir -p "$out"
exec 8>"$cache/kruise.lock"
flock 8
if up_to_date; then
    echo "e2e: CloneSet controller up to date in $out/bin"
    exit 0
fi
echo "e2e: building the CloneSet controller ($KRUISE_MODULE) into $out/bin"
start=$(date +%s)
(cd "$here/gomod/kruise" && go build -trimpath "${gcflags[@]}" -ldflags "-s -w" -o "$out/bin/cloneset-controller" .)
module_dir=$(cd "$here/gomod/kruise" && go mod download -json "$KRUISE_MODULE" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
rm -rf "$out/crd" "$out/rbac" && mkdir -p "$out/crd" "$out/rbac"
cp "$module_dir/config/crd/bases/apps.kruise.io_clonesets.yaml" "$out/crd/"
cp "$module_dir/config/rbac/role.yaml" "$out/rbac/"
chmod -R u+w "$out"
stamp_text > "$out/.stamp"
echo "e2e: CloneSet controller built in $(( $(date +%s) - start ))s"
