"""Each local pod (a training job's processes, a notebook server's) in a cgroup of its own.

Where: below the cgroup this process (the service, or the hub for notebooks) runs in, in a
folder ``tenancy/<name>`` of each hierarchy, so that whatever limits the service itself keep
holding for its pods. Which cgroups: v2 where the unified hierarchy offers the ``cpu`` and
``memory`` controllers to that folder; v1 otherwise (the ``cpu`` and ``memory`` hierarchies,
and ``cpuacct``, ``pids`` and ``freezer`` where mounted); none where neither can be written
(not root, a read-only ``/sys/fs/cgroup``): a pod is then only a process group, and ``why``
says so in one line.

What a pod's cgroup enforces:

- CPU: a CFS quota (v1 ``cpu.cfs_quota_us``, v2 ``cpu.max``) of its CPU *limit* when it has one,
  else of its CPU *request*: the local backend's capacity is a declared budget that no kubelet
  reclaims, so a pod running past its request takes time other admitted pods were promised.
  ``burst=True`` (``LocalBackend.burst_cpu``) leaves a pod without a limit uncapped, as on
  Kubernetes. Its request also sets its weight (v1 ``cpu.shares``, v2 ``cpu.weight``), which
  shares the CPUs out under contention.
- Memory: its memory limit, else its memory request, as a hard limit (swap included where the
  kernel accounts it): above it the kernel kills it (``oom_kills()`` says so afterwards).

Its end: ``kill()`` kills every process in it, ``setsid`` or not (v2 ``cgroup.kill``; else frozen,
killed and thawed, so nothing forks meanwhile), and ``remove()`` removes its folders.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache

from kubernetes.utils.quantity import parse_quantity

PARENT = "tenancy"
V1_REQUIRED = ("cpu", "memory")
V1_OPTIONAL = ("cpuacct", "pids", "freezer")
V2_CONTROLLERS = ("cpu", "memory", "pids")
PERIOD_US = 100_000
MAX_CPUS = 10_000
MAX_SHARES = 262_144
MAX_MEMORY = 2**60
MIN_QUOTA_US = 1_000


@dataclass(frozen=True)
class Limits:
    """What a pod's cgroup is given: ``cpu`` in CPUs (its quota; None: no cap), ``shares`` (v1 units,
    1024 a CPU), ``memory`` in bytes (None: no limit)."""

    cpu: Decimal | None = None
    shares: int | None = None
    memory: int | None = None


def limits_for(resources: dict | None, burst: bool = False) -> Limits:
    """A pod's ``{"requests": {...}, "limits": {...}}`` (Kubernetes quantities) as cgroup limits."""
    requests = (resources or {}).get("requests") or {}
    limits = (resources or {}).get("limits") or {}

    def quantity(table, key):
        return parse_quantity(table[key]) if table.get(key) is not None else None

    request, limit = quantity(requests, "cpu"), quantity(limits, "cpu")
    cpu = limit if limit is not None else (None if burst else request)
    memory = quantity(limits, "memory")
    memory = memory if memory is not None else quantity(requests, "memory")
    weight = request if request is not None else limit
    # Beyond any machine's CPUs or memory a cap means nothing (and the kernel refuses some such numbers).
    return Limits(cpu=cpu if cpu and 0 < cpu <= MAX_CPUS else None,
                  shares=min(MAX_SHARES, max(2, int(weight * 1024))) if weight is not None else None,
                  memory=int(memory) if memory and 0 < memory <= MAX_MEMORY else None)


@dataclass
class Cgroup:
    """One pod's cgroup: ``dirs`` maps each controller to its folder (v2: all to the one folder)."""

    name: str
    version: int
    dirs: dict[str, str] = field(default_factory=dict)
    limits: Limits | None = None  # what it was given, when this process made it

    @property
    def folders(self) -> list[str]:
        return sorted(set(self.dirs.values()))

    def join_fds(self) -> list[int]:
        """Write-only descriptors of each folder's ``cgroup.procs``: a process writing its pid to each
        joins the cgroup; opened here (as root), so a process that has already dropped to its
        account can still join. Not inherited unless passed on (``pass_fds``)."""
        return [os.open(os.path.join(d, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC) for d in self.folders]

    def join(self, pid: int = 0) -> None:
        """Move ``pid`` (0: the calling process, as in a ``preexec_fn``) into the cgroup."""
        for d in self.folders:
            _write(d, "cgroup.procs", str(pid or os.getpid()))

    def procs(self) -> set[int]:
        out: set[int] = set()
        for d in self.folders:
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    out.update(int(line) for line in f if line.strip())
            except FileNotFoundError:
                pass
        return out

    def signal(self, sig: int, outside_group: int | None = None) -> None:
        """Send ``sig`` to each process in it (with ``outside_group``: only those not in that process group,
        which the caller signals itself)."""
        for pid in self.procs():
            if outside_group is not None and _pgid(pid) == outside_group:
                continue
            _kill(pid, sig)

    def cpu_seconds(self) -> float:
        """CPU time its processes have used, children included, since it was made."""
        if self.version == 2:
            stat = _read(self.dirs["cpu"], "cpu.stat")
            return int(re.search(r"usage_usec (\d+)", stat).group(1)) / 1e6
        return int(_read(self.dirs.get("cpuacct", self.dirs["cpu"]), "cpuacct.usage")) / 1e9

    def oom_kills(self) -> int:
        """How many of its processes the kernel killed for going over its memory limit."""
        try:
            text = _read(self.dirs["memory"], "memory.events" if self.version == 2 else "memory.oom_control")
        except OSError:
            return 0
        found = re.search(r"oom_kill (\d+)", text)
        return int(found.group(1)) if found else 0

    def kill(self, timeout: float = 20.0) -> bool:
        """SIGKILL every process in it, ``setsid`` or not, until none is left; whether none is."""
        deadline = time.monotonic() + timeout
        if self.version == 2 and os.path.exists(os.path.join(self.dirs["cpu"], "cgroup.kill")):
            _write(self.dirs["cpu"], "cgroup.kill", "1")
        while self.procs():
            with self._frozen(deadline):
                self.signal(signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _frozen(self, deadline: float):
        """Frozen while in the block (nothing forks between reading the list and the kill), where it can be."""
        return _Freezer(self, deadline)

    def remove(self, timeout: float = 20.0) -> None:
        """Remove its folders (once its processes have left: a killed one is gone a moment later)."""
        deadline = time.monotonic() + timeout
        for d in self.folders:
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError as err:
                    if err.errno != errno.EBUSY or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)

    def end(self) -> None:
        """Kill what is left in it and remove it (and its ``tenancy`` parents once empty: nothing is left
        behind in the cgroups of whatever runs the service)."""
        self.kill()
        self.remove()
        for d in self.folders:
            try:
                os.rmdir(os.path.dirname(d))
            except OSError:
                pass  # other pods' cgroups are in it, or it is gone already


class _Freezer:
    def __init__(self, cg: Cgroup, deadline: float):
        self.cg, self.deadline = cg, deadline
        if cg.version == 2:
            self.path, self.on, self.off = os.path.join(cg.dirs["cpu"], "cgroup.freeze"), "1", "0"
        elif "freezer" in cg.dirs:
            self.path, self.on, self.off = os.path.join(cg.dirs["freezer"], "freezer.state"), "FROZEN", "THAWED"
        else:
            self.path = None

    def __enter__(self):
        if self.path and os.path.exists(self.path):
            _write(os.path.dirname(self.path), os.path.basename(self.path), self.on)
            if self.cg.version == 1:  # FREEZING until every task is frozen
                while _read(os.path.dirname(self.path), "freezer.state").strip() != "FROZEN":
                    if time.monotonic() > self.deadline:
                        break
                    time.sleep(0.005)
        return self

    def __exit__(self, *exc):
        if self.path and os.path.exists(self.path):
            _write(os.path.dirname(self.path), os.path.basename(self.path), self.off)  # the SIGKILLs land now


@dataclass
class Place:
    """Where pods' cgroups are made: ``parents`` maps each controller to its ``tenancy`` folder."""

    version: int
    parents: dict[str, str]

    def create(self, name: str, limits: Limits) -> Cgroup:
        """A new cgroup ``name`` (letters, digits, ``.``, ``-``, ``_``) with ``limits``."""
        name = safe_name(name)
        dirs = {c: os.path.join(p, name) for c, p in self.parents.items()}
        for d in sorted(set(dirs.values())):
            for attempt in (1, 2):
                self._parent(os.path.dirname(d))
                try:
                    os.mkdir(d, 0o755)
                    break
                except FileNotFoundError:  # another pod's end removed the empty parent meanwhile
                    if attempt == 2:
                        raise
        cg = Cgroup(name, self.version, dirs, limits)
        try:
            (_limit_v2 if self.version == 2 else _limit_v1)(cg, limits)
        except OSError:
            cg.remove()
            raise
        return cg

    def _parent(self, folder: str) -> None:
        """Make the ``tenancy`` folder (the last pod's end removes it); on v2, its children get the controllers."""
        os.makedirs(folder, 0o755, exist_ok=True)
        if self.version == 2:
            available = _read(folder, "cgroup.controllers").split()
            _write(folder, "cgroup.subtree_control", " ".join("+" + c for c in V2_CONTROLLERS if c in available))

    def of_pid(self, pid: int) -> Cgroup | None:
        """The pod cgroup ``pid`` runs in, if it is one of ours (never any other cgroup)."""
        try:
            paths = _cgroup_paths(f"/proc/{pid}/cgroup")
        except OSError:
            return None
        own, path = _cpu_path(_cgroup_paths("/proc/self/cgroup"), self.version), _cpu_path(paths, self.version)
        if own is None or path is None:
            return None
        # The pod's cgroup sits in PARENT below ours: its path is ours + /tenancy/<name>
        prefix = own.rstrip("/") + "/" + PARENT + "/"
        if not path.startswith(prefix) or "/" in path[len(prefix):]:
            return None
        return self.named(path[len(prefix):])

    def named(self, name: str) -> Cgroup | None:
        dirs = {c: os.path.join(p, name) for c, p in self.parents.items()}
        return Cgroup(name, self.version, dirs) if os.path.isdir(dirs["cpu"]) else None

    def all(self, prefix: str = "") -> list[Cgroup]:
        """Every pod cgroup here whose name starts with ``prefix``."""
        try:
            names = sorted(os.listdir(self.parents["cpu"]))
        except FileNotFoundError:  # none now (the parent goes with the last one)
            return []
        return [cg for n in names if n.startswith(prefix) and (cg := self.named(n))]


def safe_name(name: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:200]
    return "_" + name if name.startswith(".") or not name else name


@lru_cache(maxsize=None)
def place() -> tuple[Place | None, str]:
    """Where this process makes pods' cgroups (made on first use), and if nowhere, why (one line)."""
    reasons = []
    for find in (_place_v2, _place_v1):
        try:
            return find(), ""
        except (OSError, LookupError) as err:
            reasons.append(str(err) if isinstance(err, LookupError) else f"{err.strerror or err}"
                           + (f" ({err.filename})" if getattr(err, "filename", None) else ""))
    return None, "; ".join(reasons)


def of_pid(pid: int) -> Cgroup | None:
    """The pod cgroup ``pid`` runs in (None: none of ours, or no cgroups here)."""
    where, _ = place()
    return where.of_pid(pid) if where is not None and pid else None


def kill_all(pid: int) -> bool:
    """SIGKILL every process in the pod cgroup ``pid`` runs in (``setsid`` children too); whether it had
    one. Blocking (a few milliseconds; run it in a thread from async code)."""
    cg = of_pid(pid)
    if cg is None:
        return False
    cg.kill()
    return True


def signal_all(pid: int, sig: int) -> bool:
    """Send ``sig`` to every process in the pod cgroup ``pid`` runs in; whether it had one."""
    cg = of_pid(pid)
    if cg is None:
        return False
    cg.signal(sig)
    return True


# -- finding the hierarchies ----------------------------------------------------------------------

def _place_v2() -> Place:
    mounts = [m for m in _mounts() if m[2] == "cgroup2"]
    own = _cgroup_paths("/proc/self/cgroup").get("")
    if not mounts or own is None:
        raise LookupError("cgroup v2: not mounted")
    point, root = mounts[0][0], mounts[0][1]
    base = os.path.normpath(os.path.join(point, os.path.relpath(own, root)))
    available = _read(base, "cgroup.controllers").split()
    missing = [c for c in ("cpu", "memory") if c not in available]
    if missing:
        raise LookupError(f"cgroup v2: {' and '.join(missing)} not available in {base}")
    wanted = " ".join("+" + c for c in V2_CONTROLLERS if c in available)
    try:
        _write(base, "cgroup.subtree_control", wanted)
    except OSError as err:
        if err.errno == errno.EBUSY:  # its own processes sit in it: children cannot have controllers
            raise LookupError(f"cgroup v2: {base} holds processes, so its controllers cannot be given to "
                              "cgroups below it (run the service in a cgroup of its own with delegation)") from None
        raise
    parent = os.path.join(base, PARENT)  # made on first use (and removed once empty)
    return Place(2, {c: parent for c in ("cpu", "memory", "pids")})


def _place_v1() -> Place:
    own = _cgroup_paths("/proc/self/cgroup")
    parents: dict[str, str] = {}
    for point, root, fstype, opts in _mounts():
        if fstype != "cgroup":
            continue
        for c in set(opts) & set(V1_REQUIRED + V1_OPTIONAL):
            key = next((k for k in own if c in k.split(",")), None)
            if key is None or c in parents:
                continue
            path = own[key]
            parents[c] = os.path.normpath(os.path.join(point, os.path.relpath(path, root), PARENT))
    missing = [c for c in V1_REQUIRED if c not in parents]
    if missing:
        raise LookupError(f"cgroup v1: no {' or '.join(missing)} hierarchy mounted")
    for d in sorted(set(parents.values())):  # made on first use (and removed once empty)
        where = d if os.path.isdir(d) else os.path.dirname(d)
        if not os.access(where, os.W_OK):
            raise PermissionError(errno.EACCES, "cgroup v1: not writable", where)
    return Place(1, parents)


def _mounts() -> list[tuple[str, str, str, list[str]]]:
    """(mount point, root, type, options) of each cgroup mount, from /proc/self/mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                out.append((fields[4].replace("\\040", " "), fields[3], rest[0], rest[2].split(",")))
    return out


def _cpu_path(paths: dict[str, str], version: int) -> str | None:
    """The path of the cgroup (v2) or of the cpu hierarchy's (v1) in ``_cgroup_paths``."""
    if version == 2:
        return paths.get("")
    return next((p for k, p in paths.items() if "cpu" in k.split(",")), None)


def _cgroup_paths(path: str) -> dict[str, str]:
    """``/proc/PID/cgroup`` as {controllers ("" for v2): path}."""
    out = {}
    with open(path) as f:
        for line in f:
            _, controllers, where = line.rstrip("\n").split(":", 2)
            out[controllers] = where
    return out


# -- limits -----------------------------------------------------------------------------------------

def _limit_v1(cg: Cgroup, limits: Limits) -> None:
    cpu, memory = cg.dirs["cpu"], cg.dirs["memory"]
    _write(cpu, "cpu.cfs_period_us", str(PERIOD_US))
    _write(cpu, "cpu.cfs_quota_us", str(_quota_us(limits.cpu)) if limits.cpu else "-1")
    if limits.shares:
        _write(cpu, "cpu.shares", str(limits.shares))
    if limits.memory:
        _write(memory, "memory.limit_in_bytes", str(limits.memory))
        if os.path.exists(os.path.join(memory, "memory.memsw.limit_in_bytes")):  # no escape into swap
            _write(memory, "memory.memsw.limit_in_bytes", str(limits.memory))


def _limit_v2(cg: Cgroup, limits: Limits) -> None:
    d = cg.dirs["cpu"]
    _write(d, "cpu.max", f"{_quota_us(limits.cpu)} {PERIOD_US}" if limits.cpu else f"max {PERIOD_US}")
    if limits.shares:  # Kubernetes' mapping of shares [2, 262144] to weight [1, 10000]
        _write(d, "cpu.weight", str(1 + ((min(limits.shares, 262144) - 2) * 9999) // 262142))
    if limits.memory:
        _write(d, "memory.max", str(limits.memory))
        if os.path.exists(os.path.join(d, "memory.swap.max")):
            _write(d, "memory.swap.max", "0")


def _quota_us(cpus: Decimal) -> int:
    return max(MIN_QUOTA_US, int(cpus * PERIOD_US))


def _read(folder: str, name: str) -> str:
    with open(os.path.join(folder, name)) as f:
        return f.read()


def _write(folder: str, name: str, value: str) -> None:
    fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def service_prefix(data_dir: str) -> str:
    """The start of the names of the cgroups of the service whose ``LocalBackend.data_dir`` this is:
    services (and test runs) side by side on one machine never touch each other's pods."""
    return "t" + hashlib.sha256(os.path.abspath(data_dir).encode()).hexdigest()[:10] + "-"


def stop_all(data_dir: str) -> int | None:
    """Kill every process of every pod of the service using ``data_dir`` and remove their cgroups; how
    many pods there were (None: no cgroups here, so its pods cannot be found this way)."""
    where, _ = place()
    if where is None:
        return None
    found = where.all(service_prefix(data_dir))
    for cg in found:
        cg.end()
    return len(found)


def main(argv: list[str]) -> int:
    """``python -m hub_ext.backends.local.cgroups stop DATA_DIR``: what ``scripts/demo`` runs when it stops."""
    if len(argv) != 2 or argv[0] != "stop":
        print("usage: python -m hub_ext.backends.local.cgroups stop DATA_DIR", file=sys.stderr)
        return 2
    found = stop_all(argv[1])
    if found is None:
        print("The training jobs this demo started may still be running: this machine gives it no cgroups to find "
              "them by. List them with `pgrep -af hub_ext.backends.local.runner` and stop each with "
              "`kill -- -PID` (its process group).")
    elif found:
        print(f"Stopped the {found} training job pod(s) still running; they are queued again when the demo starts.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
