"""The cluster benchmark's CPU meter: seconds of CPU per process role, read from /proc."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hub_ext.bench.cpu import CpuMeter

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the meter reads Linux's /proc")

# waits for a line, spins half a CPU second, says so, and waits again (alive when the meter reads it)
SPIN = ("import sys, time\nsys.stdin.readline()\nt = time.process_time()\n"
        "while time.process_time() - t < 0.5:\n    pass\nprint('done', flush=True)\nsys.stdin.readline()\n")


def test_meter_counts_each_role_over_the_run_only():
    pipes = {"stdin": subprocess.PIPE, "text": True}
    busy = subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, **pipes)
    idle = subprocess.Popen([sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.readline()"],
                            stdout=subprocess.PIPE, **pipes)
    try:
        assert idle.stdout.readline().strip() == "ready"  # its start-up is over before the meter starts
        meter = CpuMeter({"busy": busy.pid, "idle": idle.pid, "nobody": None}).start()
        busy.stdin.write("go\n")
        busy.stdin.flush()
        assert busy.stdout.readline().strip() == "done"
        used = meter.stop()
    finally:
        for proc in (busy, idle):
            proc.kill()
            proc.wait()
    assert 0.45 <= used["busy"] < 1.5  # its spin, not its start-up before the meter started
    assert used["idle"] < 0.1
    assert "nobody" not in used and "client" in used  # this process is the client
    assert used["all"] == pytest.approx(sum(v for k, v in used.items() if k != "all"), abs=0.25)


def test_a_process_gone_before_the_end_is_left_out():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    meter = CpuMeter({"short": proc.pid}).start()
    proc.wait()
    assert "short" not in meter.stop()
