#!/usr/bin/env bash
# Build the service's image (what deploy/Dockerfile describes) without a container daemon, and
# prove its entrypoint serves /health by running it with an OCI runtime (crun; runc on hosts
# whose cgroups crun refuses).
#
# Usage: tools/image/build.sh [--run] [OUT]
#   OUT    the OCI image layout to write (default build/image); the image is OUT:<version>
#   --run  after building, run the image's entrypoint (its user 1000; the host's network, the
#          local backend, no hub) and wait until GET /services/tenancy/api/v1/health answers
#
# How: the project's wheels are built on this machine (pip, from the package registry);
# Debian's mmdebstrap makes a minimal bookworm root file system with python3 (from Debian's
# mirror) and installs the wheels into /opt/tenancy with no network; umoci turns it into an OCI
# image (one layer; entrypoint, user 1000, port 10101, the Dockerfile's settings). Push it with
# `skopeo copy oci:OUT:<version> docker://REGISTRY/jupyterhub-tenancy:<version>`.
# Needs root (mmdebstrap's root mode, the runtime) and apt for mmdebstrap, umoci and the runtime.
set -euo pipefail

die() { echo "image/build.sh: ERROR: $*" >&2; exit 1; }
log() { echo "image/build.sh: $*" >&2; }

RUN=0
OUT=""
for a in "$@"; do
  case "$a" in
    --run) RUN=1 ;;
    -h|--help) awk 'NR>1 && /^#/{sub(/^# ?/,"");print;next} NR>1{exit}' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) die "unknown option '$a' (see --help)" ;;
    *) [ -z "$OUT" ] || die "one OUT only (see --help)"; OUT=$a ;;
  esac
done
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/build/image}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)
# The project's one version: labextension/package.json (pyproject.toml reads it through hatch-nodejs-version).
VERSION=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$ROOT/labextension/package.json")
SUITE=${TENANCY_IMAGE_SUITE:-bookworm}

[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap's root mode and the runtime)"
# crun refuses a host with cgroup controllers on both v1 and v2 ("hybrid mode"); runc runs there.
RUNTIME=crun
if [ -n "$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]; then RUNTIME=runc; fi  # (its size reads 0)
missing=()
for tool in mmdebstrap umoci "$RUNTIME"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} from Debian"
  { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; } \
    || die "apt-get install ${missing[*]} failed"
fi

WORK=$(mktemp -d /tmp/tenancy-image.XXXXXX)
cleanup() {
  if [ "$RUN" = 1 ]; then
    "$RUNTIME" kill "tenancy-image-$$" KILL >/dev/null 2>&1 || true
    sleep 0.5
    "$RUNTIME" delete -f "tenancy-image-$$" >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Debian's python3 of the suite (bookworm: 3.11.2): the dependencies are resolved for it, not for
# the Python running this script (a newer 3.11 takes releases that refuse 3.11.2).
IMAGE_PYTHON=${TENANCY_IMAGE_PYTHON:-3.11.2}
log "building the wheels (the project; its dependencies as released for Python $IMAGE_PYTHON)"
mkdir -p "$WORK/wheels"
"$PYTHON" -m pip wheel -q --no-deps --wheel-dir "$WORK/wheels" "$ROOT" || die "pip wheel failed"
platforms=()
for p in manylinux_2_36 manylinux_2_34 manylinux_2_28 manylinux_2_17 manylinux2014 manylinux2010 manylinux1; do
  platforms+=(--platform "${p}_x86_64")
done
"$PYTHON" -m pip download -q --dest "$WORK/wheels" --only-binary=:all: --python-version "$IMAGE_PYTHON" \
  --implementation cp "${platforms[@]}" "$WORK"/wheels/jupyterhub_tenancy-*.whl "psycopg[binary]>=3.1" \
  || die "pip download of the dependencies failed"

log "making the root file system with mmdebstrap ($SUITE, minbase + python3)"
# The hooks run on the host with the new root as $1: the wheels go in, a venv is made from
# Debian's python3 and the wheels installed with no index, then the wheels go again.
mmdebstrap --quiet --mode=root --variant=minbase --include=python3,python3-venv,ca-certificates \
  --customize-hook="mkdir -p \"\$1/opt/wheels\" && cp -a '$WORK/wheels/.' \"\$1/opt/wheels/\"" \
  --customize-hook='chroot "$1" python3 -m venv /opt/tenancy' \
  --customize-hook='chroot "$1" /opt/tenancy/bin/pip install -q --no-index --find-links /opt/wheels jupyterhub-tenancy "psycopg[binary]"' \
  --customize-hook='rm -rf "$1/opt/wheels" "$1/root/.cache" "$1/var/lib/apt/lists/"* "$1/var/cache/apt/"*' \
  --customize-hook='chroot "$1" groupadd --gid 1000 tenancy' \
  --customize-hook='chroot "$1" useradd --uid 1000 --gid 1000 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin tenancy' \
  --customize-hook='mkdir -p "$1/var/lib/tenancy" "$1/etc/tenancy" && chown 1000:1000 "$1/var/lib/tenancy"' \
  "$SUITE" "$WORK/rootfs.tar" || die "mmdebstrap failed"

log "making the OCI image $OUT:$VERSION with umoci"
rm -rf "$OUT"
mkdir -p "$(dirname "$OUT")"
umoci init --layout "$OUT"
umoci new --image "$OUT:$VERSION"
umoci unpack --image "$OUT:$VERSION" "$WORK/bundle" >/dev/null
tar -xf "$WORK/rootfs.tar" -C "$WORK/bundle/rootfs"
umoci repack --image "$OUT:$VERSION" "$WORK/bundle"
umoci config --image "$OUT:$VERSION" \
  --config.entrypoint /opt/tenancy/bin/tenancy \
  --config.cmd serve --config.cmd --config --config.cmd /etc/tenancy/tenancy_config.py \
  --config.user 1000:1000 --config.workingdir /var/lib/tenancy --config.exposedports 10101/tcp \
  --config.env PATH=/opt/tenancy/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env PYTHONUNBUFFERED=1 --config.env PYTHONDONTWRITEBYTECODE=1 \
  --config.label "org.opencontainers.image.title=jupyterhub-tenancy" \
  --config.label "org.opencontainers.image.version=$VERSION"
umoci gc --layout "$OUT"
log "built $OUT:$VERSION ($(du -sh "$OUT" | cut -f1))"

if [ "$RUN" = 1 ]; then
  PORT=${TENANCY_IMAGE_PORT:-$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
  log "running the image's entrypoint with $RUNTIME (port $PORT)"
  umoci unpack --image "$OUT:$VERSION" "$WORK/run" >/dev/null
  # The image's own entrypoint and user; its arguments for a run without a hub or a cluster:
  # the local backend, the database on its volume, this host's network (no bridge here).
  "$PYTHON" - "$WORK/run/config.json" "$PORT" <<'EOF'
import json, sys
path, port = sys.argv[1], sys.argv[2]
cfg = json.load(open(path))
proc = cfg["process"]
proc["terminal"] = False
proc["args"] = proc["args"][:1] + ["serve", "--port", port, "--ip", "127.0.0.1",
                                   "--TenancyService.db_url=sqlite:////var/lib/tenancy/tenancy.sqlite",
                                   "--LocalBackend.data_dir=/var/lib/tenancy/data"]
proc["env"] = [e for e in proc.get("env", []) if not e.startswith("JUPYTERHUB_")] + ["JUPYTERHUB_API_TOKEN=" + "0" * 32]
cfg["linux"]["namespaces"] = [n for n in cfg["linux"]["namespaces"] if n["type"] != "network"]
cfg["root"]["readonly"] = False
json.dump(cfg, open(path, "w"))
EOF
  "$RUNTIME" run --bundle "$WORK/run" "tenancy-image-$$" </dev/null >"$WORK/container.log" 2>&1 &
  CRUN=$!
  url="http://127.0.0.1:$PORT/services/tenancy/api/v1/health"
  # Generous: beside the test tiers the build runs at the lowest priority and may wait its turn.
  WAIT=${TENANCY_IMAGE_WAIT_SECONDS:-300}
  for _ in $(seq 1 $((WAIT * 2))); do
    kill -0 "$CRUN" 2>/dev/null || die "the container exited ($(wait "$CRUN"; echo $?)): $(tail -5 "$WORK/container.log")"
    if body=$(curl -fsS --noproxy '*' "$url" 2>/dev/null); then
      log "the image's entrypoint answers $url: $body"
      echo "$body"
      exit 0
    fi
    sleep 0.5
  done
  die "the container did not answer $url within $WAIT s"
fi
