"""Fixtures shared by the top-level tests. Kept small: the hub tier (tests/hub) and the
Kubernetes tier (tests/k8s) have their own conftest.py, and fixtures here are only made
when a test asks for them.

Every run also ends with the time each test module took, wall and CPU (see ``module_times``):
scripts/test splits the suite into shards by these figures."""

import json
import os
import signal
import time
from collections import defaultdict

import pytest

from postgres import postgres_server, postgres_url  # noqa: F401 - fixtures

#: per module: [tests, wall s, CPU s of pytest itself, CPU s of the processes it started]
module_times: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])


def pytest_configure(config):
    """SIGINT as on any machine a hub runs on. A pytest started in the background by a non-interactive shell
    (scripts/test starts three so) inherits SIGINT ignored, and every hub, service and server it starts
    would too: JupyterHub stops a managed service and a server with SIGINT first and waits its
    ``interrupt_timeout`` (10 s) before SIGTERM, so each hub's stop took up to 20 s more (measured: test_load's
    teardown in the background took 20.1 s before this, 1.7 s after)."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # its children start with SIGINT's default


def pytest_collection_modifyitems(config, items):
    """The Kubernetes tier last in any run that holds it: its control plane is one session fixture, stopped only
    when the session ends, so it used to keep running, unused, through every core test collected after
    tests/k8s, on the two cores those tests need."""
    items.sort(key=lambda item: "/tests/k8s/" in str(item.fspath))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test's setup, call and teardown, added to its module's figures. A fixture counts where it
    is made and ended: a module's hub in its module, a session's (the control plane, the datasets'
    hub) in the module that first asked for it and in the session's last. A child's CPU counts once
    it has ended and been waited for (os.times), so a hub's counts when its module stops it."""
    before, wall = os.times(), time.monotonic()
    yield
    after = os.times()
    row = module_times[item.nodeid.split("::")[0]]
    row[0] += 1
    row[1] += time.monotonic() - wall
    row[2] += (after.user - before.user) + (after.system - before.system)
    row[3] += (after.children_user - before.children_user) + (after.children_system - before.children_system)


def pytest_terminal_summary(terminalreporter):
    """The CPU this run used, its own and its finished children's (hubs, servers, control planes,
    builds): the suite is CPU-bound on a two-core machine, so CI's time follows these more than any
    one test's duration. Then each module's wall and CPU, longest wall first; with
    ``TENANCY_MODULE_TIMES=FILE`` also as JSON lines appended to FILE (one per module)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    if module_times:
        terminalreporter.write_sep("=", "wall and CPU by module (s)")
        terminalreporter.write_line(f"{'wall':>7} {'CPU':>7} {'own':>6} {'child':>6} {'tests':>5}  module")
        for module, (tests, wall, mine, theirs) in sorted(module_times.items(), key=lambda kv: -kv[1][1]):
            terminalreporter.write_line(f"{wall:7.1f} {mine + theirs:7.1f} {mine:6.1f} {theirs:6.1f} {tests:5d}  {module}")
        total = [sum(row[i] for row in module_times.values()) for i in range(4)]
        terminalreporter.write_line(f"{total[1]:7.1f} {total[2] + total[3]:7.1f} {total[2]:6.1f} {total[3]:6.1f} "
                                    f"{total[0]:5d}  all modules")
        path = os.environ.get("TENANCY_MODULE_TIMES")
        if path:
            with open(path, "a") as out:
                for module, (tests, wall, mine, theirs) in sorted(module_times.items()):
                    out.write(json.dumps({"module": module, "tests": tests, "wall": round(wall, 1),
                                          "cpu_own": round(mine, 1), "cpu_children": round(theirs, 1)}) + "\n")
    terminalreporter.write_line(
        f"CPU used: {own.ru_utime + own.ru_stime:.0f} s by pytest itself, "
        f"{children.ru_utime + children.ru_stime:.0f} s by the processes it started and saw end")
