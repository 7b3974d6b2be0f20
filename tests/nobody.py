"""A script run as the unprivileged account ``nobody``, for tests of what a service that is not root
can and cannot do (no cgroup to write, no group to make). Needs root to switch to it."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from hub_ext.backends.local.account_python import python_for_accounts

TESTS = Path(__file__).resolve().parent


def run_as_nobody(script: str, top: Path) -> subprocess.CompletedProcess:
    """``python -c script TOP TESTS`` as nobody, in ``top`` (opened to it), with the project importable;
    the script's own arguments are ``top`` and the tests' folder (for ``builders``)."""
    os.chmod(top, 0o777)
    nobody = pwd.getpwnam("nobody")
    return subprocess.run([python_for_accounts(), "-c", script, str(top), str(TESTS)], capture_output=True,
                          text=True, timeout=120, user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                          cwd=str(top), env={"PYTHONPATH": str(TESTS.parent), "PATH": os.defpath, "HOME": str(top)})
