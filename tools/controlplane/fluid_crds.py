"""Fluid's own CustomResourceDefinitions (``data.fluid.io``), fetched from the Go module proxy and cached.

The tests of dataset acceleration (``tests/k8s/test_fluid.py``) apply Fluid's real CRDs to
the test control plane, so that the API server validates our Fluid ``Dataset`` and
``AlluxioRuntime`` objects against Fluid's own schema. Fluid publishes them in its
chart (``charts/fluid/fluid/crds/``, Apache-2.0) inside its Go module, so they come
the way the control plane's own sources come: ``go mod download -json
github.com/fluid-cloudnative/fluid@v1.0.0`` (the proxy the environment's ``GOPROXY``
names, verified against the checksum database as every module is), from whose zip the
13 ``data.fluid.io_*.yaml`` are copied to
``~/.cache/jupyterhub-tenancy/fluid-v1.0.0/crds`` (``$TENANCY_FLUID_CACHE``). A second
call reads the cache only (no ``go`` run).

Usage: ``python3 tools/controlplane/fluid_crds.py`` prints the cache directory (fetching
first when needed); exit 1 with one line when they cannot be had.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MODULE = "github.com/fluid-cloudnative/fluid"
VERSION = "v1.0.0"
CRD_DIR = "charts/fluid/fluid/crds/"
#: what acceleration makes: a Fluid Dataset and an AlluxioRuntime (the tests apply these two)
NEEDED = ("data.fluid.io_datasets.yaml", "data.fluid.io_alluxioruntimes.yaml")


class Unavailable(RuntimeError):
    """Fluid's CRDs cannot be had here (no ``go``, the proxy does not serve the module, ...): one line."""


def cache_dir() -> Path:
    base = os.environ.get("TENANCY_FLUID_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "jupyterhub-tenancy" / f"fluid-{VERSION}"
    return root / "crds"


def crds(names=NEEDED) -> list[Path]:
    """The CRD files ``names`` (default: the Dataset and the AlluxioRuntime), fetched into the cache first
    when it lacks one. Raises ``Unavailable`` with the reason."""
    where = cache_dir()
    if not all((where / n).is_file() for n in names):
        fetch(where)
    missing = [n for n in names if not (where / n).is_file()]
    if missing:
        raise Unavailable(f"{MODULE}@{VERSION} has no {', '.join(missing)} under {CRD_DIR}")
    return [where / n for n in names]


def fetch(where: Path) -> None:
    """Download the module (``go mod download``) and copy its CRDs into ``where`` (atomically: a rename)."""
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if go is None:
        raise Unavailable("there is no go command to fetch Fluid's CRDs from the Go module proxy")
    with tempfile.TemporaryDirectory() as empty:  # outside any module: go.mod files around play no part
        try:
            out = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{VERSION}"], cwd=empty,
                                 capture_output=True, text=True, timeout=600,
                                 env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"})
        except (OSError, subprocess.TimeoutExpired) as err:
            raise Unavailable(f"go mod download {MODULE}@{VERSION} failed: {err}") from None
    try:
        info = json.loads(out.stdout or "{}")
    except ValueError:
        info = {}
    if out.returncode != 0 or not info.get("Zip"):
        why = info.get("Error") or " ".join((out.stderr or out.stdout).split()) or f"exit {out.returncode}"
        raise Unavailable(f"the Go module proxy did not serve {MODULE}@{VERSION}: {why}")
    prefix = f"{MODULE}@{VERSION}/{CRD_DIR}"
    where.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=where.parent, prefix=".crds-"))
    try:
        with zipfile.ZipFile(info["Zip"]) as z:
            for entry in z.namelist():
                if entry.startswith(prefix) and entry.endswith(".yaml") and "/" not in entry[len(prefix):]:
                    (staging / entry[len(prefix):]).write_bytes(z.read(entry))
            licence = f"{MODULE}@{VERSION}/LICENSE"
            if licence in z.namelist():
                (staging / "LICENSE").write_bytes(z.read(licence))
        if not any(staging.glob("*.yaml")):
            raise Unavailable(f"{MODULE}@{VERSION} has no CRDs under {CRD_DIR}")
        if where.exists():
            shutil.rmtree(where)
        staging.rename(where)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def main() -> int:
    try:
        crds()
    except Unavailable as err:
        print(f"fluid_crds: {err}", file=sys.stderr)
        return 1
    print(cache_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main())
