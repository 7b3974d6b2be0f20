"""The JupyterLab extension as built and installed by scripts/setup: its jest suite (the
TypeScript's logic), that JupyterLab and jupyter-server see it, and the server part's pure
helpers. The views themselves run in headless Chromium in tests/hub/test_lab_browser.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hub_ext.quota_view import amount, current_tenant, path_to, quota_path
from hub_ext.labserver.terminal import terminal_command

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TREE = {"spec": {"root": {"name": "root", "children": [
    {"name": "root.a", "children": [{"name": "root.a.1"}, {"name": "root.a.2"}]}, {"name": "root.b"}]}}}


def test_the_typescript_passes_its_jest_suite():
    jlpm = shutil.which("jlpm", path=str(BIN)) or shutil.which("jlpm")
    if not (ROOT / "labextension" / "node_modules" / ".bin" / "jest").exists():
        pytest.fail("labextension/node_modules is missing: run scripts/setup (it runs jlpm install)", pytrace=False)
    run = subprocess.run([jlpm, "test", "--ci"], cwd=ROOT / "labextension", capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "failed" not in run.stderr.split("Tests:")[-1].split("\n")[0], run.stderr[-2000:]


def test_jupyterlab_and_jupyter_server_see_the_extension():
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER_")}
    labs = subprocess.run([str(BIN / "jupyter"), "labextension", "list"], capture_output=True, text=True, env=env,
                          timeout=120)
    line = next((x for x in (labs.stdout + labs.stderr).splitlines() if "jupyterhub-tenancy" in x), "")
    assert "enabled" in line and "OK" in line and "(python, jupyterhub-tenancy)" in line, labs.stdout + labs.stderr
    servers = subprocess.run([str(BIN / "jupyter"), "server", "extension", "list"], capture_output=True, text=True,
                             env=env, timeout=120)
    out = servers.stdout + servers.stderr
    assert "hub_ext.labserver \x1b[32menabled" in out or "hub_ext.labserver enabled" in out, out
    assert "hub_ext.labserver  \x1b[32mOK" in out or "hub_ext.labserver  OK" in out, out
    built = json.loads((ROOT / "hub_ext" / "labserver" / "labextension" / "package.json").read_text())
    assert built["name"] == "jupyterhub-tenancy" and built["jupyterlab"]["_build"]["load"].startswith("static/")


def test_the_quota_path_runs_from_the_team_to_the_root_with_numbers_for_bars():
    assert path_to(TREE, "root.a.2") == ["root.a.2", "root.a", "root"]
    assert path_to(TREE, "nowhere") == [] and path_to(None, "root") == []
    quota = {"root.a.1": {"min": {"cpu": "10", "memory": "10Gi"}, "max": {"cpu": "20", "memory": "20Gi"},
                          "used": {"cpu": "12"}},
             "root.a": {"min": {"cpu": "20"}, "max": {"cpu": "40"}, "used": {"cpu": "40"}},
             "root": {"min": {"cpu": "40"}, "max": {"cpu": "40"}, "used": {"cpu": "40"}}}
    leaf, parent, root = quota_path(TREE, quota, "root.a.1")
    assert leaf["name"] == "root.a.1" and [r["resource"] for r in leaf["resources"]] == ["cpu", "memory"]
    cpu = leaf["resources"][0]
    assert (cpu["used"], cpu["min"], cpu["max"], cpu["borrowed"], cpu["atMax"]) == (12, 10, 20, 2, False)
    assert leaf["resources"][1]["max"] == 20 * 2**30 and leaf["resources"][1]["used"] == 0
    assert parent["resources"][0]["borrowed"] == 20 and root["resources"][0]["atMax"] is True
    assert amount("500m") == 0.5 and amount("junk") == 0


def test_the_team_is_the_one_this_server_runs_for():
    teams = [{"group": "team-a"}, {"group": "team-b"}, {"group": "broken", "errors": ["x"]}]
    assert current_tenant(teams, "team-b")["group"] == "team-b"
    assert current_tenant(teams, None)["group"] == "team-a"
    assert current_tenant(teams[2:], None) is None


def test_a_terminal_keeps_the_servers_path_after_the_login_profile(tmp_path):
    # A login shell whose profile resets PATH, as Debian's /etc/profile does.
    home = tmp_path / "home"
    home.mkdir()
    (home / ".profile").write_text("PATH=/usr/bin:/bin; export PATH; PROFILE_RAN=yes; export PROFILE_RAN\n")
    tools = tmp_path / "venv-bin"
    tools.mkdir()
    (tools / "tenancy").write_text("#!/bin/sh\necho tenancy-here\n")
    (tools / "tenancy").chmod(0o755)
    cmd = terminal_command("/bin/sh", f"{tools}:/usr/bin:/bin")
    run = subprocess.run(cmd, input="echo $PROFILE_RAN; tenancy\nexit\n", capture_output=True, text=True,
                         env={"HOME": str(home), "PATH": f"{tools}:/usr/bin:/bin", "ENV": ""}, timeout=30)
    assert run.stdout.split() == ["yes", "tenancy-here"], (run.stdout, run.stderr)
