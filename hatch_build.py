"""The wheel's build step for the service's pages: Chart.js and the pages' scripts, bundled by esbuild.

``pages/`` (npm: chart.js and esbuild, pinned in package-lock.json) is built into
``hub_ext/service/static/build/``, which is not in git and is shipped in the wheel and the
sdist (``artifacts`` in pyproject.toml), as the JupyterLab extension is, so that the sdist
installs without Node.js. Skipped when the bundle is there already (``scripts/build-pages``
made it, an earlier build, or the sdist being built into a wheel).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class PagesBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        root = Path(self.root)
        if self.target_name not in ("wheel", "sdist") or (root / "hub_ext/service/static/build/pages.js").exists():
            return
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("building the tenancy service's pages needs Node.js 20+ and npm (pages/)")
        for args in ([npm, "ci", "--no-audit", "--no-fund"], [npm, "run", "build"]):
            subprocess.run(args, cwd=root / "pages", check=True)
