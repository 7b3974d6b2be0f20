"""The cluster benchmark's CPU meters: seconds of CPU per process role, and one process's by thread, read from /proc."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hub_ext.bench.cpu import CpuMeter, ThreadMeter
from hub_ext.threadnames import name_this_thread, short

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


# names one thread as the service names its own, spins it half a CPU second once told, says so, and
# waits (alive, as the service's threads are, when the meter reads it: a thread gone is left out)
NAMED = ("import sys, threading, time\nfrom hub_ext.threadnames import name_this_thread\n"
         "def spin():\n    name_this_thread('tenancy-k8s_3')\n    sys.stdin.readline()\n    t = time.thread_time()\n"
         "    while time.thread_time() - t < 0.5:\n        pass\n    print('done', flush=True)\n"
         "    sys.stdin.readline()\n"
         "worker = threading.Thread(target=spin)\nworker.start()\nprint('ready', flush=True)\nworker.join()\n")


def test_thread_meter_counts_each_named_thread_over_the_run():
    pytest.importorskip("setproctitle", reason="threads name themselves with setproctitle (the test extras)")
    proc = subprocess.Popen([sys.executable, "-c", NAMED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    try:
        assert proc.stdout.readline().strip() == "ready"
        meter = ThreadMeter(proc.pid).start()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "done"
        used = meter.stop()
    finally:
        proc.kill()
        proc.wait()
    # the pool's numbered worker under its group's name, without our prefix; the main thread idle
    assert 0.45 <= used["k8s"] < 1.5, used
    assert used.get("main", 0.0) < 0.2, used
    assert list(used)[0] == "k8s"  # most first


def test_a_thread_name_fits_the_kernel_and_the_main_thread_keeps_the_process_name():
    assert short("tenancy-watch-our pods") == "watch-our pods"
    assert short("tenancy-watch-persistentvolumeclaims") == "watch-persisten"  # 15 bytes, the kernel's most
    assert short("other-thread") == "other-thread"
    before = Path("/proc/self/comm").read_text()
    name_this_thread("tenancy-not-the-process")  # called on the main thread: a no-op
    assert Path("/proc/self/comm").read_text() == before


def test_thread_meter_of_a_process_gone_is_empty():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    meter = ThreadMeter(proc.pid).start()
    proc.wait()
    assert meter.stop() == {}
