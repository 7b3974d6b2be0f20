"""Accelerated datasets (issue 20's "Acceleration") on a real control plane, at the object level.

Fluid's own CRDs (``data.fluid.io``, v1.0.0, from the Go module proxy through
``tools/controlplane/fluid_crds.py``) are applied to the real API server, so our Fluid
``Dataset`` and ``AlluxioRuntime`` objects pass Fluid's real schema or are refused by it.
Nothing of Fluid runs here (no controller, no runtime pods): the acceleration stays
Pending, "waiting for Fluid to make claim <name>-accelerated", until that claim exists and
is Bound; where a test needs that claim, it plays Fluid's controller and makes the PV and
PVC Fluid would make, and says so. The service's real datasets room and the Kubernetes
backend run in this process; everything is read back from the API server.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
import pytest_asyncio
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

import fluid_crds
from hub_ext.backends.kubernetes.api import Api
from hub_ext.backends.kubernetes.backend import KubernetesBackend
from hub_ext.backends.kubernetes.datasets import NAMESPACE_LABEL
from hub_ext.backends.kubernetes.fluid import NO_FLUID
from hub_ext.quota.dataset import parse_dataset
from hub_ext.service.controller import Controller
from hub_ext.service.datasets import Conflict
from hub_ext.service.store import Store

from objects import dataset_namespaces
from waiting import CALL_TIMEOUT, until, wait_for

GROUP, VERSION = "data.fluid.io", "v1alpha1"
MOUNT = "/datasets/fashion-mnist"
FAST = "fashion-mnist-accelerated"


def fashion_mnist(*namespaces):
    return parse_dataset({
        "apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": "fashion-mnist"},
        "spec": {"namespaces": list(namespaces), "size": "10Gi", "mountPath": MOUNT,
                 "source": {"persistentVolume": {
                     "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany"],
                     "persistentVolumeReclaimPolicy": "Retain",
                     "hostPath": {"path": "/srv/datasets/fashion-mnist", "type": "DirectoryOrCreate"}}}}})


def folder(*namespaces):
    return parse_dataset({"apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset",
                          "metadata": {"name": "folder"},
                          "spec": {"namespaces": list(namespaces), "source": {"path": "/srv/data/fashion"}}})


def served(api) -> set[str]:
    """The data.fluid.io/v1alpha1 resources the API server serves now (empty: none)."""
    return Api(api).served_resources(f"{GROUP}/{VERSION}")


def crd_names(paths) -> list[str]:
    return [yaml.safe_load(p.read_text())["metadata"]["name"] for p in paths]


def crd_states(api, names) -> dict:
    """Each CRD's state: "absent", "terminating" (deleted, its objects still being removed) or
    "established" / "not established"."""
    ext = client.ApiextensionsV1Api(api)
    out = {}
    for name in names:
        try:
            crd = ext.read_custom_resource_definition(name, _request_timeout=CALL_TIMEOUT)
        except ApiException as err:
            if err.status != 404:
                raise
            out[name] = "absent"
            continue
        if crd.metadata.deletion_timestamp:
            out[name] = "terminating"
        else:
            conds = {c.type: c.status for c in ((crd.status and crd.status.conditions) or [])}
            out[name] = "established" if conds.get("Established") == "True" else "not established"
    return out


def remove_crds(api, names) -> None:
    """Delete the CRDs and wait until they are gone: a CRD still terminating answers a create with 409
    and then disappears, so the next test would find Fluid served and then not."""
    ext = client.ApiextensionsV1Api(api)
    for name in names:
        try:
            ext.delete_custom_resource_definition(name, _request_timeout=CALL_TIMEOUT)
        except ApiException as err:
            if err.status != 404:
                raise
    wait_for(lambda: set(crd_states(api, names).values()) == {"absent"}, "Fluid's CRDs removed", 120,
             show=lambda: crd_states(api, names))


@pytest.fixture
def fluid(api):
    """Fluid's Dataset and AlluxioRuntime CRDs applied (from the cache, fetched from the Go module
    proxy once) and established, removed afterwards: the other tests see a cluster without Fluid."""
    try:
        paths = fluid_crds.crds()
    except fluid_crds.Unavailable as err:
        pytest.skip(f"Fluid's CRDs cannot be had from a registry here: {err}")
    names = crd_names(paths)
    # one a test before left terminating must be gone first, or our create would meet it (409)
    wait_for(lambda: "terminating" not in crd_states(api, names).values(), "an earlier test's Fluid CRDs gone",
             120, show=lambda: crd_states(api, names))
    ext = client.ApiextensionsV1Api(api)
    for path in paths:
        try:
            ext.create_custom_resource_definition(yaml.safe_load(path.read_text()), _request_timeout=CALL_TIMEOUT)
        except ApiException as err:
            if err.status != 409:
                raise
    wait_for(lambda: set(crd_states(api, names).values()) == {"established"}, "Fluid's CRDs established", 120,
             show=lambda: crd_states(api, names))
    yield names
    remove_crds(api, names)


@pytest.fixture
def no_fluid(api):
    """A cluster whose API server serves nothing of Fluid (its CRDs removed when a test left them)."""
    names = [f"datasets.{GROUP}", f"alluxioruntimes.{GROUP}"]
    remove_crds(api, names)
    return names


@pytest.fixture
def namespaces(control_plane, api):
    yield from dataset_namespaces(control_plane, api, "fl", ("a", "b"))


@pytest_asyncio.fixture
async def service(api, tmp_path):
    """The service's controller (its real datasets room, its store) with the Kubernetes backend."""
    made = []

    def make(datasets, **traits):
        backend = KubernetesBackend(api_client=api, dataset_recheck_seconds=0.5, poll_seconds=0.3, **traits)
        c = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), backend=backend, tree=None)
        c.datasets.configure(list(datasets))
        made.append(backend)
        return c

    yield make
    for backend in made:
        backend.close()


def fluid_object(api, plural, ns, name=FAST):
    try:
        return client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, ns, plural, name)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def acceleration(c, name, ns):
    return c.datasets.acceleration_state(name, ns)


def row(ns, wid, name="fashion-mnist"):
    return SimpleNamespace(id=wid, name="train", namespace=ns, kind="training", user="alice",
                           spec={"command": ["python", "train.py"], "priorityClassName": "high-priority-research", "resources": {"requests": {"cpu": "1"}},
                                 "replicas": 1, "datasets": [{"name": name}]})


def claims_mounted(pod_spec) -> dict:
    by_name = {v.name: v for v in pod_spec.volumes or []}
    return {m.mount_path: by_name[m.name].persistent_volume_claim.claim_name
            for m in pod_spec.containers[0].volume_mounts or [] if by_name[m.name].persistent_volume_claim}


def play_fluid(core, ns, name=FAST):
    """What Fluid's controller would make for its Dataset ``name`` in ``ns`` (it is not running here): a
    PersistentVolume and the claim named after the Fluid Dataset, bound to it."""
    pv = f"{ns}-{name}"
    core.create_persistent_volume({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv, "labels": {NAMESPACE_LABEL: ns}},
        "spec": {"capacity": {"storage": "100Pi"}, "accessModes": ["ReadOnlyMany"], "storageClassName": "fluid",
                 "hostPath": {"path": f"/runtime-mnt/alluxio/{ns}/{name}/alluxio-fuse"}}})
    core.create_namespaced_persistent_volume_claim(ns, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "fluid", "volumeName": pv,
                 "resources": {"requests": {"storage": "100Pi"}}}})


@pytest.mark.asyncio
async def test_without_fluid_the_button_says_why_and_accelerate_is_refused(api, no_fluid, namespaces, service):
    a, _ = namespaces
    ds = fashion_mnist(a)
    c = service([ds])
    assert c.datasets.view(ds)["acceleration"]["why"] == \
        "the cluster has not been asked yet whether it has Fluid; try again in a moment"
    await until(lambda: not served(api), "Fluid's resources no longer served", in_thread=True)
    await c.backend.fluid.check(0.0)
    view = c.datasets.view(ds)["acceleration"]
    assert view == {"available": False, "why": NO_FLUID, "enabled": False, "state": {}}
    assert NO_FLUID == ("the cluster has no Fluid (data.fluid.io Dataset and runtime CRDs); install Fluid to "
                        "accelerate datasets")
    with pytest.raises(Conflict) as refused:  # the API's 409
        c.datasets.accelerate(ds.name, True)
    assert str(refused.value) == f"Dataset fashion-mnist cannot be accelerated: {NO_FLUID}"
    assert c.datasets.accelerated == set()


@pytest.mark.asyncio
async def test_accelerate_makes_fluid_objects_per_namespace_and_work_mounts_the_cache_once_bound(
        api, fluid, namespaces, service, seed_classes):
    """With Fluid's CRDs served: per namespace a Fluid Dataset ``fashion-mnist-accelerated`` whose mount is
    our claim (``pvc://fashion-mnist``; a folder: ``local://<path>``) and an AlluxioRuntime of that name,
    read back from the API server. Pending with Fluid's words while no claim of that name is Bound; once
    the test, playing Fluid's controller, makes that claim Bound in one namespace, a training Job there
    mounts it and one in the other namespace still mounts the dataset's own claim. The choice survives a
    restart; turned off, the objects go and work mounts the dataset's own claim again."""
    a, b = namespaces
    ds, dir_ds = fashion_mnist(a, b), folder(a)
    c = service([ds, dir_ds])
    await until(lambda: {"datasets", "alluxioruntimes"} <= served(api), "Fluid's CRDs served", in_thread=True)
    assert await c.backend.fluid.check(0.0) is None
    c.datasets.start()
    for ns in (a, b):
        await until(lambda ns=ns: c.datasets.state(ds.name, ns)[0] == "Bound", f"fashion-mnist Bound in {ns}", 60)
    assert c.datasets.view(ds)["acceleration"] == {"available": True, "why": None, "enabled": False, "state": {}}
    assert c.datasets.accelerate(ds.name, True) and c.datasets.accelerate(dir_ds.name, True)

    for ns in (a, b):
        made = await until(lambda ns=ns: fluid_object(api, "datasets", ns), f"the Fluid Dataset in {ns}",
                           in_thread=True)
        assert made["spec"]["mounts"] == [{"name": "fashion-mnist", "mountPoint": "pvc://fashion-mnist", "path": "/",
                                           "readOnly": True}]
        assert made["spec"]["accessModes"] == ["ReadOnlyMany"]
        assert made["metadata"]["labels"]["tenancy.jupyter.org/dataset"] == "fashion-mnist"
        runtime = await until(lambda ns=ns: fluid_object(api, "alluxioruntimes", ns), f"the runtime in {ns}",
                              in_thread=True)
        assert runtime["kind"] == "AlluxioRuntime" and runtime["spec"]["replicas"] == 1
        assert runtime["spec"]["tieredstore"]["levels"] == [  # volumeType: the default Fluid's own schema sets
            {"mediumtype": "MEM", "path": "/dev/shm", "quota": "1Gi", "high": "0.95", "low": "0.7",
             "volumeType": "hostPath"}]
    made = await until(lambda: fluid_object(api, "datasets", a, "folder-accelerated"), "the folder's Fluid Dataset",
                       in_thread=True)
    assert made["spec"]["mounts"][0]["mountPoint"] == "local:///srv/data/fashion"
    assert fluid_object(api, "datasets", b, "folder-accelerated") is None  # b may not use the folder

    for ns in (a, b):
        state, words, claim = await until(
            lambda ns=ns: acceleration(c, ds.name, ns)[1] != f"the cache is not made in {ns} yet"
            and acceleration(c, ds.name, ns), f"the acceleration's state in {ns}")
        assert (state, words, claim) == ("Pending", f"waiting for Fluid to make claim {FAST} in {ns} from its "
                                                    f"Dataset and AlluxioRuntime {FAST}", None)
    view = c.datasets.view(ds)["acceleration"]
    assert view["enabled"] and view["state"][a]["state"] == "Pending"
    pending = row(a, "before")
    assert c.datasets.uses(pending)[0]["volume"] == {"persistentVolumeClaim": {"claimName": "fashion-mnist",
                                                                               "readOnly": True}}

    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    await asyncio.to_thread(play_fluid, core, a)  # Fluid's controller would: it does not run here
    await until(lambda: acceleration(c, ds.name, a)[0] == "Bound", f"the acceleration Bound in {a}", 60,
                show=lambda: acceleration(c, ds.name, a))
    assert acceleration(c, ds.name, a)[2] == FAST and acceleration(c, ds.name, b)[0] == "Pending"
    for i, (ns, claim) in enumerate(((a, FAST), (b, "fashion-mnist"))):
        work = row(ns, f"w{i}")
        c.datasets.pin(work)  # the workload starts
        job = c.backend.job_manifest(work, SimpleNamespace(name=f"train-{i}", uid=i))
        await asyncio.to_thread(batch.create_namespaced_job, ns, job)
        spec = (await asyncio.to_thread(batch.read_namespaced_job, f"train-{i}", ns)).spec.template.spec
        assert claims_mounted(spec) == {MOUNT: claim}, ns

    # a restart keeps the choice (the store)
    again = service([ds, dir_ds])
    assert again.datasets.accelerated == {"fashion-mnist", "folder"}

    assert c.datasets.accelerate(ds.name, False)
    for ns in (a, b):
        await until(lambda ns=ns: fluid_object(api, "datasets", ns) is None
                    and fluid_object(api, "alluxioruntimes", ns) is None, f"the Fluid objects of {ns} removed",
                    in_thread=True)
    assert fluid_object(api, "datasets", a, "folder-accelerated") is not None  # still chosen
    assert c.datasets.view(ds)["acceleration"] == {"available": True, "why": None, "enabled": False, "state": {}}
    after = row(a, "after")
    c.datasets.pin(after)
    assert c.datasets.uses(after)[0]["volume"]["persistentVolumeClaim"]["claimName"] == "fashion-mnist"
    # the workload that started on the cache keeps mounting it (what its pods have) while it runs
    started = row(a, "w0")
    started.spec["cached"] = {ds.name: FAST}
    assert c.datasets.uses(started)[0]["volume"]["persistentVolumeClaim"]["claimName"] == FAST


@pytest.mark.asyncio
async def test_an_object_fluids_schema_refuses_is_refused_with_the_api_servers_words(api, fluid, namespaces, service):
    a, _ = namespaces
    ds = folder(a)
    c = service([ds], fluid_cache_memory="plenty")  # not a quantity: Fluid's schema says so
    await until(lambda: {"datasets", "alluxioruntimes"} <= served(api), "Fluid's CRDs served", in_thread=True)
    await c.backend.fluid.check(0.0)
    c.datasets.start()
    c.datasets.accelerate(ds.name, True)
    state, words, _ = await until(lambda: acceleration(c, ds.name, a)[0] == "Refused" and acceleration(c, ds.name, a),
                                  "the acceleration Refused", 60, show=lambda: acceleration(c, ds.name, a))
    assert words.startswith(f'AlluxioRuntime {a}/folder-accelerated: AlluxioRuntime.data.fluid.io '
                            f'"folder-accelerated" is invalid: spec.tieredstore.levels[0].quota'), words
    assert "plenty" in words
    assert fluid_object(api, "alluxioruntimes", a, "folder-accelerated") is None
