"""The package as people install it: from a clean clone of HEAD, ``python -m build`` makes the
sdist and then the wheel from that sdist (building needs Node.js: the Lab extension and the
pages' bundle); each is then installed into a fresh virtualenv with no Node.js on PATH, where
JupyterLab and jupyter-server must find the extension enabled, its settings schema and the
pages' bundle in place.

uv (from PyPI, in the test extras) makes the build's isolated environment and the two
virtualenvs: pip took nine of this test's fifteen minutes on a loaded machine, most of it
resolving and unpacking the same 130 packages three times. Still the slowest module of the
core tier: deselect it locally with ``-m "not packaging"``; scripts/test (CI) runs it beside the
tiers at the lowest CPU priority, with the image's test: its time limits allow for waiting its turn."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from email.parser import Parser
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[1]
UV = Path(sys.executable).with_name("uv")
NAME = "jupyterhub-tenancy"
BUILT = ("hub_ext/labserver/labextension/package.json", "hub_ext/labserver/labextension/install.json",
         "hub_ext/labserver/labextension/schemas/jupyterhub-tenancy/plugin.json",
         "hub_ext/service/static/build/pages.js")
CLASSIFIERS = {"Framework :: Jupyter", "Framework :: Jupyter :: JupyterLab", "Framework :: Jupyter :: JupyterLab :: 4",
               "Framework :: Jupyter :: JupyterLab :: Extensions",
               "Framework :: Jupyter :: JupyterLab :: Extensions :: Prebuilt"}


def run(cmd, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """The sdist and the wheel built from a clean clone of HEAD (what is committed, nothing else)."""
    work = tmp_path_factory.mktemp("packaging")
    head = run(["git", "rev-parse", "HEAD"], cwd=ROOT).stdout.strip()
    run(["git", "clone", "--quiet", "--no-checkout", ROOT, work / "clone"])
    run(["git", "checkout", "--quiet", head], cwd=work / "clone")
    run([sys.executable, "-m", "build", "--installer", "uv", "--outdir", work / "dist", work / "clone"], timeout=900)
    [sdist] = (work / "dist").glob("*.tar.gz")
    [wheel] = (work / "dist").glob("*.whl")
    return {"sdist": sdist, "wheel": wheel}


def test_the_sdist_carries_the_built_extension_the_bundle_and_the_license(dists):
    with tarfile.open(dists["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {*BUILT, "LICENSE", "labextension/schema/plugin.json", "labextension/src/vocabulary.ts"} <= names
    assert not any(n.startswith(("labextension/node_modules/", "pages/node_modules/")) for n in names)


def test_the_wheel_has_one_version_its_classifiers_and_its_dependencies(dists):
    version = json.loads((ROOT / "labextension" / "package.json").read_text())["version"]
    with zipfile.ZipFile(dists["wheel"]) as whl:
        names = set(whl.namelist())
        [meta] = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(whl.read(meta).decode())
    assert metadata["Version"] == version and metadata["License-Expression"] == "BSD-3-Clause"
    assert CLASSIFIERS <= set(metadata.get_all("Classifier"))
    assert any(r.startswith("jinja2") for r in metadata.get_all("Requires-Dist"))
    data = f"{NAME.replace('-', '_')}-{version}.data/data"
    assert {f"{data}/share/jupyter/labextensions/{NAME}/package.json",
            f"{data}/share/jupyter/labextensions/{NAME}/schemas/{NAME}/plugin.json",
            f"{data}/etc/jupyter/jupyter_server_config.d/{NAME}.json", "hub_ext/service/static/build/pages.js"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def install(dist: Path, venv: Path) -> dict[str, str]:
    """``dist`` installed into a fresh virtualenv, with JupyterLab as a single-user image has it;
    the environment to run its tools in: no Node.js on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = str(venv / "bin")
    run([UV, "venv", "--quiet", "--python", sys.executable, venv], env=env)
    assert shutil.which("node", path=env["PATH"]) is None and shutil.which("npm", path=env["PATH"]) is None
    run([UV, "pip", "install", "--quiet", "--python", venv / "bin" / "python", dist, "jupyterlab"], env=env, timeout=1200)
    return env


@pytest.fixture(scope="module")
def installed(dists, tmp_path_factory) -> dict[str, tuple[Path, dict[str, str]]]:
    """The sdist and the wheel, each in its own fresh virtualenv (installed side by side)."""
    work = tmp_path_factory.mktemp("venvs")
    with ThreadPoolExecutor(2) as pool:
        envs = dict(zip(dists, pool.map(lambda kind: install(dists[kind], work / kind), dists)))
    return {kind: (work / kind, envs[kind]) for kind in dists}


@pytest.mark.parametrize("kind", ["sdist", "wheel"])
def test_installed_without_node_jupyterlab_and_jupyter_server_see_the_extension(installed, kind, tmp_path):
    venv, env = installed[kind]
    # A home of its own: nothing from the user's own Jupyter configuration or data.
    env = {**env, "HOME": str(tmp_path)}
    labs = run([venv / "bin" / "jupyter", "labextension", "list"], env=env, timeout=900)
    out = labs.stdout + labs.stderr
    line = next((x for x in out.splitlines() if NAME in x), "")
    assert "enabled" in line and "OK" in line and f"(python, {NAME})" in line, out
    servers = run([venv / "bin" / "jupyter", "server", "extension", "list"], env=env, timeout=900)
    out = servers.stdout + servers.stderr
    assert "hub_ext.labserver \x1b[32menabled" in out or "hub_ext.labserver enabled" in out, out
    assert "hub_ext.labserver  \x1b[32mOK" in out or "hub_ext.labserver  OK" in out, out
    share = venv / "share" / "jupyter" / "labextensions" / NAME
    assert json.loads((share / "schemas" / NAME / "plugin.json").read_text())["properties"].keys() == {
        "showStatusItem", "saveBeforePreemption", "notifications"}
    pages = run([venv / "bin" / "python", "-c", "import hub_ext, pathlib; print(pathlib.Path(hub_ext.__file__).parent)"],
                env=env).stdout.strip()
    assert (Path(pages) / "service" / "static" / "build" / "pages.js").stat().st_size > 100_000
