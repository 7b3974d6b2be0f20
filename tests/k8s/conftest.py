"""Fixtures for tests against a real local Kubernetes control plane.

The binaries come from ``tools/controlplane/build.sh``. Set ``TENANCY_SKIP_K8S=1`` to
skip this tier; otherwise missing binaries are an error, not a skip. The tier runs under the
project's pytest settings (pyproject.toml), alone too: ``pytest tests/k8s``.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "controlplane"))

import controlplane  # noqa: E402

SKIP = os.environ.get("TENANCY_SKIP_K8S") == "1"

#: the session's running control plane (for the per-module CPU figures), once a test asked for it,
#: and its components' CPU seconds at the end of the last module (none yet: its start counts there)
_running: list[controlplane.ControlPlane] = []
_last_reading: dict[str, float] = {}
#: per module (in the order run): CPU seconds each control plane component used during it
control_plane_cpu: dict[str, dict[str, float]] = {}
#: (wall seconds the control plane ran, CPU seconds per component over that time, RSS MiB at its end)
control_plane_total: list[tuple[float, dict[str, float], dict[str, float]]] = []


def pytest_collection_modifyitems(config, items):
    if not SKIP:
        return
    mark = pytest.mark.skip(reason="TENANCY_SKIP_K8S=1")
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(mark)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory):
    """A running ControlPlane (etcd, kube-apiserver, KCM, kube-scheduler, kwok)."""
    if SKIP:
        pytest.skip(reason="TENANCY_SKIP_K8S=1 asks to skip the Kubernetes tier")
    bin_dir = controlplane.default_bin_dir()
    missing = controlplane.missing_binaries(bin_dir)
    if missing:
        pytest.fail(
            f"Kubernetes test binaries missing in {bin_dir}: {', '.join(missing)}.\n"
            "Build them with tools/controlplane/build.sh (about 15 min cold, cached after), "
            "or set TENANCY_SKIP_K8S=1 to skip the k8s tier.",
            pytrace=False,
        )
    workdir = tmp_path_factory.mktemp("controlplane")
    cp = controlplane.ControlPlane(workdir, bin_dir, **controlplane.TEST_ARGS)
    started = time.monotonic()
    try:
        cp.start()
    except controlplane.ControlPlaneError as e:
        pytest.fail(f"control plane did not start: {e}", pytrace=False)
    _running.append(cp)
    _last_reading.clear()
    try:
        yield cp
    finally:
        _running.clear()
        mem, cpu = cp.memory_usage(), cp.cpu_usage()
        control_plane_total.append((time.monotonic() - started, cpu, mem))
        cp.stop()
        sys.stderr.write(
            "\ncontrol plane RSS (MiB): "
            + ", ".join(f"{k}={v:.0f}" for k, v in mem.items() if v is not None)
            + f"\ncontrol plane logs: {cp.logs}\n"
        )


@pytest.fixture(scope="module", autouse=True)
def _control_plane_cpu_by_module(request):
    """The control plane's CPU during each module, from the end of the one before (its start counts
    in the module that first asks for it): it runs through the whole tier, so its idle minutes count
    where they are spent."""
    yield
    if _running:
        now = _running[0].cpu_usage()
        control_plane_cpu[request.module.__name__] = {n: v - _last_reading.get(n, 0.0) for n, v in now.items()}
        _last_reading.update(now)


def pytest_terminal_summary(terminalreporter):
    """The control plane's CPU seconds per component, by module and over the session (read from
    /proc/<pid>/stat while it runs): most of what this tier costs on CI's two cores."""
    if not control_plane_total:
        return
    names = list(controlplane.BINARIES)
    short = {"kube-apiserver": "apiserver", "kube-controller-manager": "kcm", "kube-scheduler": "scheduler"}
    terminalreporter.write_sep("=", "control plane CPU by module (s)")
    terminalreporter.write_line(" ".join(f"{short.get(n, n):>9}" for n in names) + f" {'all':>7}  module")
    for module, cpu in control_plane_cpu.items():
        terminalreporter.write_line(" ".join(f"{cpu.get(n, 0.0):9.1f}" for n in names)
                                    + f" {sum(cpu.values()):7.1f}  {module}")
    for wall, cpu, mem in control_plane_total:
        terminalreporter.write_line(" ".join(f"{cpu.get(n, 0.0):9.1f}" for n in names)
                                    + f" {sum(cpu.values()):7.1f}  whole session ({wall:.0f} s running)")
        terminalreporter.write_line(" ".join(f"{mem.get(n) or 0.0:9.0f}" for n in names)
                                    + f" {sum(v or 0.0 for v in mem.values()):7.0f}  RSS at the end (MiB)")


@pytest.fixture(scope="session")
def api(control_plane):
    """An admin ``kubernetes.client.ApiClient``."""
    client = control_plane.api_client()
    yield client
    client.close()


@pytest.fixture
def namespace(control_plane, api):
    """A fresh namespace (with its default ServiceAccount), deleted afterwards."""
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:8]}"
    control_plane.create_namespace(name)
    yield name
    client.CoreV1Api(api).delete_namespace(name)


@pytest.fixture(scope="module")
def seed_classes(api):
    """The three seed PriorityClasses; those created here are deleted afterwards (the provisioning
    tests expect to create them themselves)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    created = ensure_priority_classes(api)
    yield
    sched = client.SchedulingV1Api(api)
    for name in created:
        try:
            sched.delete_priority_class(name)
        except ApiException:
            pass


def ensure_priority_classes(api):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from hub_ext.quota.priorityclass import SEED_CLASSES

    sched = client.SchedulingV1Api(api)
    created = []
    for pc in SEED_CLASSES:
        try:
            sched.create_priority_class(client.V1PriorityClass(
                metadata=client.V1ObjectMeta(name=pc.name), value=pc.value, description=pc.description,
                preemption_policy=pc.preemption_policy))
            created.append(pc.name)
        except ApiException as err:
            if err.status != 409:
                raise
    return created
