#!/usr/bin/env bash
# Regenerate tools/controlplane/go/{kube,kwok}/go.mod and go.sum for a Kubernetes / kwok
# version. Only needed to move to another version; build.sh uses the committed files.
#
#   tools/controlplane/gen-gomod.sh [K8S_VERSION] [KWOK_VERSION]
#   e.g. tools/controlplane/gen-gomod.sh v1.37.2 v0.7.0
#
# k8s.io/kubernetes requires its staging modules (k8s.io/api, k8s.io/client-go, ...) at
# v0.0.0 and replaces them with ./staging/... -- replaces that are ignored for a
# dependency. So every `k8s.io/<x> v0.0.0` require of k8s.io/kubernetes' own go.mod gets
# a replace by the published k8s.io/<x> v0.<minor>.<patch>. The list is generated from
# the go.mod that the module proxy serves, so that new staging modules (cri-streaming,
# streaming, ...) are picked up automatically.
set -euo pipefail

K8S_VERSION=${1:-v1.37.2}
KWOK_VERSION=${2:-v0.7.0}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
export GOFLAGS=-mod=mod

case "$K8S_VERSION" in
  v1.*.*) ;;
  *) echo "gen-gomod.sh: K8S_VERSION must look like v1.Y.Z, got '$K8S_VERSION'" >&2; exit 2 ;;
esac
STAGING_VERSION="v0.${K8S_VERSION#v1.}"

gomod=$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" \
  | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -f "$gomod" ] || { echo "gen-gomod.sh: could not download k8s.io/kubernetes@${K8S_VERSION}" >&2; exit 1; }
staging=$(awk '/^require[[:space:]]*\(/{r=1;next} r&&/^\)/{r=0} r&&$1~/^k8s\.io\//&&$2=="v0.0.0"{print $1}' "$gomod" | sort -u)
[ -n "$staging" ] || { echo "gen-gomod.sh: no v0.0.0 staging requires found in $gomod" >&2; exit 1; }

# --- control plane + etcd -------------------------------------------------------------
cd "$HERE/go/kube"
rm -f go.mod go.sum
go mod init tenancy.local/controlplane/kube >/dev/null 2>&1
# keep the go directive of k8s.io/kubernetes itself
go mod edit -go="$(awk '$1=="go"{print $2; exit}' "$gomod")"
go mod edit -require="k8s.io/kubernetes@${K8S_VERSION}"
for m in $staging; do
  go mod edit -require="${m}@${STAGING_VERSION}" -replace="${m}=${m}@${STAGING_VERSION}"
done
go mod tidy
echo "go/kube: k8s.io/kubernetes ${K8S_VERSION}, $(echo "$staging" | wc -l) staging modules at ${STAGING_VERSION}"

# --- kwok -----------------------------------------------------------------------------
cd "$HERE/go/kwok"
rm -f go.mod go.sum
go mod init tenancy.local/controlplane/kwok >/dev/null 2>&1
kwokmod=$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" \
  | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
go mod edit -go="$(awk '$1=="go"{print $2; exit}' "$kwokmod")"
go mod edit -require="sigs.k8s.io/kwok@${KWOK_VERSION}"
go mod tidy
echo "go/kwok: sigs.k8s.io/kwok ${KWOK_VERSION}"
