"""The service's image, built without a container daemon (``tools/image/build.sh``: mmdebstrap, umoci)
and run by an OCI runtime: its own entrypoint, as its own user, serves ``/health``.

Run beside the other tiers at the lowest CPU and I/O priority (scripts/test): it takes what they leave idle.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = json.loads((ROOT / "labextension" / "package.json").read_text())["version"]  # the one version


def blob(layout: Path, digest: str) -> dict:
    algorithm, _, value = digest.partition(":")
    return json.loads((layout / "blobs" / algorithm / value).read_text())


@pytest.mark.skipif(os.geteuid() != 0, reason="mmdebstrap's root mode and the OCI runtime need root")
def test_the_image_is_built_without_a_daemon_and_its_entrypoint_serves_health(tmp_path):
    layout = tmp_path / "image"
    proc = subprocess.run(["bash", str(ROOT / "tools/image/build.sh"), "--run", str(layout)],
                          env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True,
                          timeout=3600)  # it runs at the lowest priority: beside a CPU hog it took over 30 min
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"status": "ok", "problems": []}
    [manifest] = json.loads((layout / "index.json").read_text())["manifests"]
    assert manifest["annotations"]["org.opencontainers.image.ref.name"] == VERSION
    config = blob(layout, blob(layout, manifest["digest"])["config"]["digest"])["config"]
    assert config["Entrypoint"] == ["/opt/tenancy/bin/tenancy"]
    assert config["Cmd"] == ["serve", "--config", "/etc/tenancy/tenancy_config.py"]
    assert config["User"] == "1000:1000"
    assert "10101/tcp" in config["ExposedPorts"]
