"""The local backend's process handling, on real processes: graceful stop, then kill; exit status kept."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

from hub_ext.backends.local.backend import LocalBackend, _alive, _read_exit

STUBBORN = "import signal, time\nsignal.signal(signal.SIGTERM, lambda *a: print('got SIGTERM', flush=True))\n" \
           "print('started', flush=True)\ntime.sleep(60)\n"
POLITE = "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\n" \
         "print('started', flush=True)\ntime.sleep(60)\n"


def _run(tmp_path, script):
    exit_file = tmp_path / "pod.exit"
    log = open(tmp_path / "pod.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "hub_ext.backends.local.runner", str(exit_file), "--",
                             sys.executable, "-c", script], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 20
    while b"started" not in (tmp_path / "pod.log").read_bytes():
        assert time.monotonic() < deadline, "the process did not start"
        time.sleep(0.05)
    return proc, exit_file


def test_eviction_is_sigterm_then_the_grace_period_then_sigkill(tmp_path):
    proc, exit_file = _run(tmp_path, STUBBORN)
    started = time.monotonic()
    asyncio.run(LocalBackend()._terminate(proc.pid, grace=1.5))
    took = time.monotonic() - started
    proc.wait(timeout=10)
    assert 1.4 <= took < 10, took  # it waited the grace period, not less, then killed
    assert not _alive(proc.pid)
    assert b"got SIGTERM" in (tmp_path / "pod.log").read_bytes()  # asked first
    assert proc.returncode == -9  # the runner itself went with the group's SIGKILL


def test_a_pod_that_stops_on_sigterm_is_not_killed_and_its_status_is_kept(tmp_path):
    proc, exit_file = _run(tmp_path, POLITE)
    started = time.monotonic()
    asyncio.run(LocalBackend()._terminate(proc.pid, grace=30))
    assert time.monotonic() - started < 10  # no need to wait out the grace period
    assert proc.wait(timeout=10) == 3 and _read_exit(exit_file) == 3


def test_the_runner_reports_a_missing_command(tmp_path):
    exit_file = tmp_path / "x.exit"
    code = subprocess.run([sys.executable, "-m", "hub_ext.backends.local.runner", str(exit_file), "--",
                           "/nonexistent/command"], capture_output=True, text=True, timeout=30)
    assert code.returncode == 127 and "cannot run /nonexistent/command" in code.stderr
    assert _read_exit(exit_file) == 127 and not os.path.exists(str(exit_file) + ".tmp")
