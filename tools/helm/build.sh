#!/usr/bin/env bash
# Build the `helm` CLI (helm.sh/helm/v3) from the Go module proxy, for tests/k8s/test_helm.py.
#
# Usage: tools/helm/build.sh [--print-path] [--force]
#   --print-path  print only where the binary is (no build) and exit
#   --force       rebuild even when the cached binary is there
#
# Environment:
#   TENANCY_HELM_VERSION  helm version (default v3.22.0)
#   TENANCY_HELM_CACHE    cache dir (default ~/.cache/jupyterhub-tenancy/helm-<version>);
#                         the binary goes to $TENANCY_HELM_CACHE/bin/helm
#   GOTOOLCHAIN           default "local"
#   GOMODCACHE            the usual Go module cache (downloads), left in place
#
# Idempotent: when the binary exists and reports the wanted version, it only prints its
# path (well under a second). The last line printed on success is the binary's path.
# The build's private GOCACHE is removed after a successful build (kept after a failure).
set -euo pipefail

die() { echo "helm/build.sh: ERROR: $*" >&2; exit 1; }
log() { echo "helm/build.sh: $*" >&2; }

PRINT_ONLY=0
FORCE=0
for a in "$@"; do
  case "$a" in
    --print-path) PRINT_ONLY=1 ;;
    --force) FORCE=1 ;;
    -h|--help) awk 'NR>1 && /^#/{sub(/^# ?/,"");print;next} NR>1{exit}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument '$a' (see --help)" ;;
  esac
done

VERSION=${TENANCY_HELM_VERSION:-v3.22.0}
CACHE=${TENANCY_HELM_CACHE:-${HOME}/.cache/jupyterhub-tenancy/helm-${VERSION}}
BIN="$CACHE/bin"
HELM="$BIN/helm"
if [ "$PRINT_ONLY" = 1 ]; then echo "$HELM"; exit 0; fi

# Bump RECIPE when the way the binary is built changes: cached builds are then redone.
RECIPE=2
STAMP="$VERSION recipe $RECIPE"
complete() { [ -x "$HELM" ] && [ -f "$BIN/.version" ] && [ "$(cat "$BIN/.version")" = "$STAMP" ]; }

if [ "$FORCE" = 0 ] && complete; then
  log "up to date: helm $VERSION"
  echo "$HELM"
  exit 0
fi

command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || die "no 'go' on PATH"
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
export GOFLAGS="-buildvcs=false"   # `go install pkg@version` refuses -mod=...
export CGO_ENABLED=0

mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
command -v flock >/dev/null 2>&1 && { flock 9 || die "cannot lock $CACHE/.build.lock"; }
if [ "$FORCE" = 0 ] && complete; then
  log "up to date (built by a concurrent run)"; echo "$HELM"; exit 0
fi

export GOCACHE="$CACHE/go-build"
OUT="$CACHE/bin.new"
rm -rf "$OUT"
mkdir -p "$OUT"
start=$(date +%s)
log "building helm $VERSION with $(go version) into $CACHE"
# What helm's Makefile stamps in: its version, and the Kubernetes version that `helm
# template` and `helm lint` assume (.Capabilities.KubeVersion, deprecation checks), from
# the k8s.io/client-go it is built with (v0.37.x -> 1.37); without it they assume 1.20.
GOMOD_JSON=$(cd "$CACHE" && go mod download -json "helm.sh/helm/v3@${VERSION}") \
  || die "go mod download helm.sh/helm/v3@${VERSION} failed (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
GOMOD_FILE=$(printf '%s\n' "$GOMOD_JSON" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
CLIENT_GO=$(awk '$1=="k8s.io/client-go" && $2 ~ /^v/ {print $2; exit}' "$GOMOD_FILE")
[ -n "$CLIENT_GO" ] || die "k8s.io/client-go not found in $GOMOD_FILE"
K8S_MAJOR=$(( $(echo "$CLIENT_GO" | sed 's/^v//' | cut -d. -f1) + 1 ))
K8S_MINOR=$(echo "$CLIENT_GO" | cut -d. -f2)
LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=${VERSION} -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in pkg/lint/rules pkg/chartutil; do
  LDFLAGS+=" -X helm.sh/helm/v3/${pkg}.k8sVersionMajor=${K8S_MAJOR} -X helm.sh/helm/v3/${pkg}.k8sVersionMinor=${K8S_MINOR}"
done
log "  Kubernetes version assumed by helm template/lint: ${K8S_MAJOR}.${K8S_MINOR} (client-go ${CLIENT_GO})"
# Run outside any module, so that no go.mod around here is read.
(cd "$CACHE" && GOBIN="$OUT" go install -trimpath -ldflags "$LDFLAGS" "helm.sh/helm/v3/cmd/helm@${VERSION}") \
  || die "go install helm.sh/helm/v3/cmd/helm@${VERSION} failed (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
"$OUT/helm" version --short 2>/dev/null | grep -q "^${VERSION}" \
  || die "the built helm does not report ${VERSION}: $("$OUT/helm" version --short 2>&1 || true)"
echo "$STAMP" > "$OUT/.version"
rm -rf "$BIN"
mv "$OUT" "$BIN"
rm -rf "$GOCACHE"
log "built in $(( $(date +%s) - start ))s"
echo "$HELM"
