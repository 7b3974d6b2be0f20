#!/usr/bin/env bash
# Build the binaries of a real local Kubernetes control plane for tests:
#   kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes),
#   etcd (go.etcd.io/etcd/server/v3) and kwok (sigs.k8s.io/kwok, the fake kubelet),
# all from the Go module proxy, pinned by the committed go/{kube,kwok}/go.{mod,sum}.
#
# Usage: tools/controlplane/build.sh [--print-bin-dir] [--force]
#   --print-bin-dir  print only the bin directory (no build) and exit
#   --force          rebuild even when the cache is complete
#
# Environment:
#   TENANCY_K8S_CACHE  cache dir (default ~/.cache/jupyterhub-tenancy/k8s-<version>);
#                      binaries go to $TENANCY_K8S_CACHE/bin
#   GOTOOLCHAIN        default "local" (the installed go must be >= the go directive)
#   BUILD_PARALLELISM  go build -p (default 2)
#   TENANCY_K8S_KEEP_GOCACHE=1  keep the build's private GOCACHE ($TENANCY_K8S_CACHE/go-build,
#                      ~4.5 GB) after a successful build; by default it is removed then
#                      (it is kept after a failure, so that a rerun resumes)
#   GOMODCACHE         the usual Go module cache (~0.6 GB of downloads), left in place
#
# Idempotent: when all binaries exist and were built from the same go.mod/go.sum, it
# only prints where they are (well under a second). The last line printed on success
# is the bin directory. Exits non-zero with a message on failure.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KUBE_MOD="$HERE/go/kube"
KWOK_MOD="$HERE/go/kwok"

die() { echo "controlplane/build.sh: ERROR: $*" >&2; exit 1; }
log() { echo "controlplane/build.sh: $*" >&2; }

PRINT_ONLY=0
FORCE=0
for a in "$@"; do
  case "$a" in
    --print-bin-dir) PRINT_ONLY=1 ;;
    --force) FORCE=1 ;;
    -h|--help) awk 'NR>1 && /^#/{sub(/^# ?/,"");print;next} NR>1{exit}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument '$a' (see --help)" ;;
  esac
done

modver() { # modver <go.mod> <module path> -> version in its require blocks
  awk -v m="$2" '$1==m && $2 ~ /^v/ {print $2; exit} $1=="require" && $2==m {print $3; exit}' "$1"
}
for f in "$KUBE_MOD/go.mod" "$KUBE_MOD/go.sum" "$KWOK_MOD/go.mod" "$KWOK_MOD/go.sum"; do
  [ -f "$f" ] || die "missing $f (run tools/controlplane/gen-gomod.sh)"
done
K8S_VERSION=$(modver "$KUBE_MOD/go.mod" k8s.io/kubernetes)
ETCD_VERSION=$(modver "$KUBE_MOD/go.mod" go.etcd.io/etcd/server/v3)
KWOK_VERSION=$(modver "$KWOK_MOD/go.mod" sigs.k8s.io/kwok)
[ -n "$K8S_VERSION" ] && [ -n "$ETCD_VERSION" ] && [ -n "$KWOK_VERSION" ] \
  || die "could not read versions from go/kube/go.mod and go/kwok/go.mod"
K8S_MINOR=$(echo "$K8S_VERSION" | cut -d. -f2)

CACHE=${TENANCY_K8S_CACHE:-${HOME}/.cache/jupyterhub-tenancy/k8s-${K8S_VERSION}}
BIN="$CACHE/bin"
if [ "$PRINT_ONLY" = 1 ]; then echo "$BIN"; exit 0; fi

BINARIES=(kube-apiserver kube-controller-manager kube-scheduler etcd kwok)
STAMP_WANT=$(cat "$KUBE_MOD/go.mod" "$KUBE_MOD/go.sum" "$KUBE_MOD/tools.go" \
                 "$KWOK_MOD/go.mod" "$KWOK_MOD/go.sum" "$KWOK_MOD/tools.go" \
             | sha256sum | cut -d' ' -f1)

complete() {
  [ -f "$BIN/.stamp" ] && [ "$(cat "$BIN/.stamp")" = "$STAMP_WANT" ] || return 1
  local b
  for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
}

if [ "$FORCE" = 0 ] && complete; then
  log "up to date: Kubernetes $K8S_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION"
  echo "$BIN"
  exit 0
fi

# --- toolchain checks -----------------------------------------------------------------
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || die "no 'go' on PATH (Go >= 1.26 needed)"
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
PAR=${BUILD_PARALLELISM:-2}
need_go=$(awk '$1=="go"{print $2; exit}' "$KUBE_MOD/go.mod")
have_go=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -1)" != "$need_go" ]; then
  die "go $have_go is older than the go $need_go that k8s.io/kubernetes $K8S_VERSION needs (GOTOOLCHAIN=$GOTOOLCHAIN)"
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
command -v flock >/dev/null 2>&1 && { flock 9 || die "cannot lock $CACHE/.build.lock"; }
# another process may have finished the build while we waited for the lock
if [ "$FORCE" = 0 ] && complete; then
  log "up to date (built by a concurrent run)"; echo "$BIN"; exit 0
fi

# Build from copies of the module files, so that -mod=mod can never rewrite the repo.
export GOCACHE="$CACHE/go-build"
SRC="$CACHE/src"
OUT="$CACHE/bin.new"
rm -rf "$SRC" "$OUT"
mkdir -p "$SRC/kube" "$SRC/kwok" "$OUT"
cp "$KUBE_MOD"/go.mod "$KUBE_MOD"/go.sum "$KUBE_MOD"/tools.go "$SRC/kube/"
cp "$KWOK_MOD"/go.mod "$KWOK_MOD"/go.sum "$KWOK_MOD"/tools.go "$SRC/kwok/"

start=$(date +%s)
log "building Kubernetes $K8S_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION with $(go version) -p $PAR into $CACHE"

log "downloading modules"
(cd "$SRC/kube" && go mod download) || die "go mod download failed for go/kube (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
(cd "$SRC/kwok" && go mod download) || die "go mod download failed for go/kwok"
log "  modules downloaded in $(( $(date +%s) - start ))s"

KLDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${K8S_MINOR} -X k8s.io/component-base/version.gitTreeState=clean"
KLDFLAGS+=" -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION} -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=${K8S_MINOR}"
build() { # build <module dir> <output name> <package> <ldflags>
  local t0=$(date +%s)
  log "go build $3"
  (cd "$1" && go build -p "$PAR" -trimpath -ldflags "$4" -o "$OUT/$2" "$3") \
    || die "go build $3 failed"
  log "  $2 done in $(( $(date +%s) - t0 ))s"
}
build "$SRC/kube" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$KLDFLAGS"
build "$SRC/kube" kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$KLDFLAGS"
build "$SRC/kube" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$KLDFLAGS"
build "$SRC/kube" etcd go.etcd.io/etcd/server/v3 "-s -w"
build "$SRC/kwok" kwok sigs.k8s.io/kwok/cmd/kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION}"

# smoke test the results before publishing them
"$OUT/kube-apiserver" --version | grep -q "Kubernetes ${K8S_VERSION}" || die "kube-apiserver does not report ${K8S_VERSION}"
"$OUT/etcd" --version >/dev/null || die "etcd --version failed"
"$OUT/kwok" --help >/dev/null 2>&1 || die "kwok --help failed"

echo "$STAMP_WANT" > "$OUT/.stamp"
cat > "$OUT/VERSIONS" <<EOF
kubernetes $K8S_VERSION
etcd $ETCD_VERSION
kwok $KWOK_VERSION
go $(go env GOVERSION)
EOF
rm -rf "$BIN"
mv "$OUT" "$BIN"
rm -rf "$SRC"
[ "${TENANCY_K8S_KEEP_GOCACHE:-0}" = 1 ] || rm -rf "$GOCACHE"
log "built in $(( $(date +%s) - start ))s"
ls -l "$BIN" >&2
echo "$BIN"
