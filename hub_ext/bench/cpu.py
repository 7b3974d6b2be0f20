"""Where a benchmark run's CPU went: seconds of CPU (user + system) per process role on this machine.

Both sides of the cluster benchmark share one machine with the control plane, so a side is as
fast as the CPU the control plane gets. The meter reads ``/proc/<pid>/stat`` (Linux) at the
start and at the end of a timed run and sums the difference per role: the control plane's own
processes (named by their executables), and those the benchmark names by pid (the tenancy
service, the hub, this process: the client). ``ThreadMeter`` reads one process's threads the same
way, by the names they give themselves (``hub_ext.threadnames``). Elsewhere (no ``/proc``) they
report nothing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: roles of the control plane's processes, by the name of their executable
CONTROL_PLANE = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok")

_PROC = Path("/proc")


def _ticks_per_second() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        return 100


def _stat_seconds(stat: Path) -> float | None:
    """User + system CPU from a ``stat`` file of proc(5) (a process's or a thread's), None when it is gone."""
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # utime and stime: fields 14 and 15 of proc(5), counted here from field 3 (after the ")")
    return (int(fields[11]) + int(fields[12])) / _ticks_per_second()


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU of one process (its threads; not its children), or None when it is gone."""
    return _stat_seconds(_PROC / str(pid) / "stat")


def thread_cpu_seconds(pid: int) -> dict[int, tuple[str, float]]:
    """One process's CPU by thread: ``{tid: (name, seconds)}``, the name ``main`` for its first thread,
    else the one the thread gave itself (``hub_ext.threadnames``; unnamed, the process's). {} when
    the process is gone or there is no /proc."""
    out: dict[int, tuple[str, float]] = {}
    try:
        tasks = list((_PROC / str(pid) / "task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            name = "main" if task.name == str(pid) else (task / "comm").read_text().strip()
        except OSError:
            continue  # ended meanwhile
        seconds = _stat_seconds(task / "stat")
        if seconds is not None:
            out[int(task.name)] = (name, seconds)
    return out


def _control_plane(kubeconfig: str | None = None) -> dict[int, str]:
    """pid -> role of the control plane's processes on this machine; with ``kubeconfig``, only those
    of its cluster (other control planes may run beside it: tests, other work): the kube-apiserver
    on its port, the etcd that API server uses, the components whose kubeconfig names that server."""
    found: dict[int, tuple[str, list[str]]] = {}
    if not _PROC.is_dir():
        return {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        name = os.path.basename(argv[0])
        if name in CONTROL_PLANE:
            found[int(entry.name)] = (name, argv)
    if kubeconfig is None:
        return {pid: name for pid, (name, _) in found.items()}
    from .kube import _server_of

    server = _server_of(kubeconfig)
    port = server.rsplit(":", 1)[-1].strip("/") if server else None

    def flag(argv, key):
        return next((a.split("=", 1)[1] for a in argv if a.startswith(f"--{key}=")), None)

    ours = {pid: name for pid, (name, argv) in found.items()
            if (name == "kube-apiserver" and flag(argv, "secure-port") == port) or
            (name not in ("kube-apiserver", "etcd") and flag(argv, "kubeconfig")
             and _server_of(flag(argv, "kubeconfig")) == server)}
    etcds = {url for pid in ours for url in (flag(found[pid][1], "etcd-servers") or "").split(",") if url}
    ours.update({pid: name for pid, (name, argv) in found.items()
                 if name == "etcd" and set((flag(argv, "listen-client-urls") or "").split(",")) & etcds})
    return ours


class CpuMeter:
    """``start()``, the run, ``stop()``: ``{role: CPU seconds}`` over the run, and ``"all"``.

    ``pids`` names more processes by role (``{"tenancy service": pid}``); this process is the
    ``"client"``. A process gone by the end of the run is left out (its last reading is lost with it)."""

    def __init__(self, pids: dict[str, int | None] | None = None, kubeconfig: str | None = None):
        self.kubeconfig = kubeconfig  # only this cluster's control plane (see _control_plane)
        self.roles = {pid: role for role, pid in (pids or {}).items() if pid}
        self.roles.setdefault(os.getpid(), "client")
        self._start: dict[int, tuple[str, float]] = {}

    def _read(self) -> dict[int, tuple[str, float]]:
        out = {}
        for pid, role in {**_control_plane(self.kubeconfig), **self.roles}.items():
            seconds = process_cpu_seconds(pid)
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
        # to /proc's own resolution (10 ms): rounded to 0.1 s, a small run's watcher (under 0.05 s for 50
        # pods on a fast machine) read as nothing at all
        return {role: round(seconds, 2) for role, seconds in totals.items()}


class ThreadMeter:
    """``start()``, the run, ``stop()``: ``{thread name: CPU seconds}`` of one process over the run,
    a pool's numbered workers (``k8s_0``, ``k8s_1``...) together (``k8s``), most first, every thread
    alive at the end (an idle one at 0, to /proc's 10 ms). A thread started during the run counts
    from nothing; one that ended before its end is left out (its last reading is lost with it).
    {} when the process is gone."""

    def __init__(self, pid: int | None):
        self.pid = pid
        self._start: dict[int, tuple[str, float]] = {}

    def start(self) -> "ThreadMeter":
        self._start = thread_cpu_seconds(self.pid) if self.pid else {}
        return self

    def stop(self) -> dict[str, float]:
        used: dict[str, float] = {}
        for tid, (name, seconds) in (thread_cpu_seconds(self.pid) if self.pid else {}).items():
            before = self._start.get(tid)
            group = re.sub(r"_\d+$", "", name)
            used[group] = used.get(group, 0.0) + seconds - (before[1] if before else 0.0)
        return {name: round(seconds, 2) for name, seconds in sorted(used.items(), key=lambda kv: -kv[1])}


def _core_ticks() -> dict[str, tuple[int, int]]:
    """``{"cpu0": (busy, total), ...}`` from ``/proc/stat`` (jiffies since boot); {} without it."""
    out = {}
    try:
        lines = (_PROC / "stat").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        if line.startswith("cpu") and line[3:4].isdigit():
            name, *values = line.split()
            ticks = [int(v) for v in values]
            idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
            total = sum(ticks[:8])  # guest time is counted in user already
            out[name] = (total - idle, total)
    return out


class CoreSampler:
    """How busy each core was, second by second: ``start()``, the run, ``stop()`` ->
    ``[(wall time at the end of the second, {"cpu0": 0.93, ...}), ...]`` (fractions of that second)."""

    def __init__(self, interval: float = 1.0):
        import threading

        self.interval = interval
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-cores", daemon=True)

    def start(self) -> "CoreSampler":
        """Start sampling; ``started`` (wall-clock) is when the first second began."""
        import time

        self._before, self.started = _core_ticks(), time.time()
        self._thread.start()
        return self

    def _loop(self) -> None:
        import time

        before, k = self._before, 0
        while True:  # on a fixed schedule: a late sample (a loaded machine) does not shift the next ones
            k += 1
            end = self.started + k * self.interval
            if self._stop.wait(max(0.0, end - time.time())):
                break
            now = _core_ticks()
            busy = {}
            for core, (b, t) in now.items():
                b0, t0 = before.get(core, (b, t))
                busy[core] = round((b - b0) / (t - t0), 2) if t > t0 else 0.0
            self.samples.append((end, busy))  # its second, though read a little late
            before = now

    def stop(self) -> list[tuple[float, dict[str, float]]]:
        self._stop.set()
        self._thread.join(5)
        return self.samples


def affinity(pids: dict[str, int | None] | None = None, kubeconfig: str | None = None) -> dict[str, str]:
    """The cores each role's processes may run on, as Linux lists them (``0-1``), read from every
    thread's ``/proc/<pid>/task/<tid>/status``: the control plane's processes (by name; with
    ``kubeconfig`` only its cluster's), ``pids``
    (role -> pid) and this process, the ``"client"``. Threads of one role that differ are listed
    each (``0 / 0-1``). Elsewhere (no ``/proc``): {}."""
    roles: dict[str, set[str]] = {}
    named = {pid: role for role, pid in (pids or {}).items() if pid}
    named.setdefault(os.getpid(), "client")
    for pid, role in {**_control_plane(kubeconfig), **named}.items():
        try:
            tasks = list((_PROC / str(pid) / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                status = (task / "status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    roles.setdefault(role, set()).add(line.split(":", 1)[1].strip())
    return {role: " / ".join(sorted(lists)) for role, lists in sorted(roles.items())}
