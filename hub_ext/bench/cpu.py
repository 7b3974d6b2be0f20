"""Where a benchmark run's CPU went: seconds of CPU (user + system) per process role on this machine.

Both sides of the cluster benchmark share one machine with the control plane, so a side is as
fast as the CPU the control plane gets. The meter reads ``/proc/<pid>/stat`` (Linux) at the
start and at the end of a timed run and sums the difference per role: the control plane's own
processes (named by their executables), and those the benchmark names by pid (the tenancy
service, the hub, this process: the client). Elsewhere (no ``/proc``) it reports nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

#: roles of the control plane's processes, by the name of their executable
CONTROL_PLANE = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok")

_PROC = Path("/proc")


def _ticks_per_second() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        return 100


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU of one process (its threads; not its children), or None when it is gone."""
    try:
        fields = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # utime and stime: fields 14 and 15 of proc(5), counted here from field 3 (after the ")")
    return (int(fields[11]) + int(fields[12])) / _ticks_per_second()


def _control_plane() -> dict[int, str]:
    found = {}
    if not _PROC.is_dir():
        return found
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
        except OSError:
            continue
        name = os.path.basename(argv0)
        if name in CONTROL_PLANE:
            found[int(entry.name)] = name
    return found


class CpuMeter:
    """``start()``, the run, ``stop()``: ``{role: CPU seconds}`` over the run, and ``"all"``.

    ``pids`` names more processes by role (``{"tenancy service": pid}``); this process is the
    ``"client"``. A process gone by the end of the run is left out (its last reading is lost with it)."""

    def __init__(self, pids: dict[str, int | None] | None = None):
        self.roles = {pid: role for role, pid in (pids or {}).items() if pid}
        self.roles.setdefault(os.getpid(), "client")
        self._start: dict[int, tuple[str, float]] = {}

    def _read(self) -> dict[int, tuple[str, float]]:
        out = {}
        for pid, role in {**_control_plane(), **self.roles}.items():
            seconds = _cpu_seconds(pid)
            if seconds is not None:
                out[pid] = (role, seconds)
        return out

    def start(self) -> "CpuMeter":
        self._start = self._read()
        return self

    def stop(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for pid, (role, seconds) in self._read().items():
            before = self._start.get(pid)
            totals[role] = totals.get(role, 0.0) + seconds - (before[1] if before else 0.0)
        if totals:
            totals["all"] = sum(totals.values())
        return {role: round(seconds, 1) for role, seconds in totals.items()}
