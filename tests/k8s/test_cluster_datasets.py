"""Datasets on a real control plane (issue 20): the service's controller and its datasets room with the
Kubernetes backend, against the real API server.

The seed's fashion-mnist (its PV and PVC, ``hostPath`` in place of OSS) declared for
two namespaces becomes two PersistentVolumes and two claims that
kube-controller-manager's PV controller binds; training Jobs the controller admits
(run by kwok on a node of the test's own) and notebook pods (KubeSpawner's own pod
manifest, given the workload JSON the controller shows) mount the claim read-only at
``/datasets/fashion-mnist``; a third namespace's job naming it is refused at
submission; a namespace whose ResourceQuota allows no claim is Refused with the API
server's words, its jobs naming the dataset wait with those words, and it is tried
again only when the quota changes; a namespace taken out loses its claim and volume
once no running job mounts them; a deleted claim is made again; the cluster's Dataset
objects are declared in the room. Everything is read back from the API server.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytest_asyncio
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from hub_ext.backends.kubernetes.api import POD
from hub_ext.backends.kubernetes.backend import KubernetesBackend
from hub_ext.backends.kubernetes.datasets import DATASET_LABEL, NAMESPACE_LABEL
from hub_ext.backends.kubernetes.objects import WORKLOAD_LABEL
from hub_ext.quota.dataset import claim_name, parse_dataset, volume_name
from hub_ext.service.controller import Controller, Forbidden, Identity
from hub_ext.service.store import Store
from hub_ext.tenants import Tenant

from objects import dataset_namespaces
from waiting import quiet_passes, until, wait_for

REPO = Path(__file__).resolve().parents[2]
MOUNT = "/datasets/fashion-mnist"
ADMIN = Identity(name="admin", admin=True)
USERS = ("alice", "bob", "carol")  # one for each namespace of the fixture, in its order


def fashion_mnist(*namespaces, name="fashion-mnist", **spec):
    """The seed's dataset: PV ReadWriteMany 10Gi (hostPath in place of its OSS volume), claim 10Gi."""
    return parse_dataset({
        "apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": name},
        "spec": {"description": "Fashion-MNIST, 70,000 28x28 images", "namespaces": list(namespaces),
                 "source": {"persistentVolume": {
                     "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany"],
                     "persistentVolumeReclaimPolicy": "Retain",
                     "hostPath": {"path": "/srv/datasets/fashion-mnist", "type": "DirectoryOrCreate"}}},
                 "size": "10Gi", "mountPath": MOUNT, **spec}})


@pytest.fixture
def namespaces(control_plane, api):
    """Three fresh namespaces; their PVs (cluster-scoped) and the namespaces removed afterwards."""
    yield from dataset_namespaces(control_plane, api, "ds", ("a", "b", "c"))


@pytest.fixture
def node(control_plane, api, seed_classes):
    """A kwok node only this module's backend uses (by label): the admitted training pods run there."""
    suffix = uuid.uuid4().hex[:6]
    name, label = f"ds-{suffix}", {"tenancy-test/datasets": suffix}
    control_plane.add_node(name, {"cpu": "16", "memory": "64Gi"}, labels=label)
    yield label
    try:
        client.CoreV1Api(api).delete_node(name)
    except ApiException:
        pass


@pytest_asyncio.fixture
async def controller(api, namespaces, node, tmp_path):
    """The service's controller (its store, engine and datasets room) with the Kubernetes backend; one
    tenant per namespace, whose member is the user of ``USERS`` in the same place."""
    (key, value), = node.items()
    backend = KubernetesBackend(api_client=api, node_label_selector=f"{key}={value}", node_selector=node,
                                dataset_recheck_seconds=0.5, poll_seconds=0.3)
    c = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), backend=backend, tree=None)
    c.set_tenants([Tenant(group=f"team-{ns}", namespace=ns, members=[user]) for ns, user in zip(namespaces, USERS)])
    try:
        yield c
    finally:
        for task in list(c._tasks):
            task.cancel()
        await asyncio.gather(*c._tasks, return_exceptions=True)
        backend.close()


def serve(c, *datasets) -> None:
    """What the service does at start: the configuration's datasets, then the backend told of them."""
    c.datasets.configure(list(datasets))
    c.datasets.start()


def who(c, user) -> Identity:
    return Identity(name=user, tenants=[t for t in c.tenants if user in t.members])


def claim(api, ns, name="fashion-mnist"):
    try:
        return client.CoreV1Api(api).read_namespaced_persistent_volume_claim(name, ns)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def volume(api, name):
    try:
        return client.CoreV1Api(api).read_persistent_volume(name)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


async def state_is(c, pair, state, timeout=60):
    """The room's state of (dataset, namespace) once it is ``state``: (state, the backend's words)."""
    return await until(lambda: c.datasets.states.get(pair, (None,))[0] == state and c.datasets.states[pair],
                       f"dataset {pair[0]} in {pair[1]} {state}", timeout, show=lambda: c.datasets.states.get(pair))


async def no_claims_allowed(core, ns) -> client.V1ResourceQuota:
    """A ResourceQuota "storage" in ``ns`` that allows no claim, once the quota controller enforces it."""
    quota = client.V1ResourceQuota(metadata=client.V1ObjectMeta(name="storage"),
                                   spec=client.V1ResourceQuotaSpec(hard={"persistentvolumeclaims": "0"}))
    await asyncio.to_thread(core.create_namespaced_resource_quota, ns, quota)
    await until(lambda: (core.read_namespaced_resource_quota("storage", ns).status.hard or {}).get(
        "persistentvolumeclaims") == "0", "the quota's status", in_thread=True)
    return quota


def training(name, **body):
    return {"kind": "training", "name": name, "command": ["python", "train.py"],
            "resources": {"requests": {"cpu": "1"}}, **body}


def workload_pods(api, row):
    return client.CoreV1Api(api).list_namespaced_pod(row.namespace, label_selector=f"{WORKLOAD_LABEL}={row.id}").items


def workload_jobs(api, ns):
    return client.BatchV1Api(api).list_namespaced_job(ns).items


async def runs(api, c, row):
    """Tick the controller until the workload's pod is Running on the cluster (kwok runs it) and the
    controller's view says Running (what the backend observed); that pod."""
    def running():
        pods = [p for p in workload_pods(api, row) if p.status.phase == "Running"]
        return pods and c.view(row)["state"] == "Running" and pods[0]
    return await until(running, f"workload {row.name} in {row.namespace} Running", 60, 0.3, tick=c.tick,
                       in_thread=True, show=lambda: (c.view(row)["state"], c.view(row)["message"],
                                                     [(p.metadata.name, p.status.phase) for p in workload_pods(api, row)]))


def mounted(pod_spec, container) -> dict:
    """{mountPath: (claim, readOnly of the mount, readOnly of the claim)} read from a pod spec (client model)."""
    by_name = {v.name: v for v in pod_spec.volumes or []}
    out = {}
    for m in container.volume_mounts or []:
        source = by_name[m.name].persistent_volume_claim
        if source is not None:
            out[m.mount_path] = (source.claim_name, m.read_only, source.read_only)
    return out


@pytest.mark.asyncio
async def test_fashion_mnist_for_two_namespaces_two_volumes_two_claims_bound_a_third_refused(api, namespaces,
                                                                                           controller):
    a, b, c = namespaces
    ds = fashion_mnist(a, b)
    serve(controller, ds)
    for ns in (a, b):
        await state_is(controller, (ds.name, ns), "Bound")
    volumes = set()
    for ns in (a, b):
        pvc = await asyncio.to_thread(claim, api, ns)
        assert pvc.status.phase == "Bound"
        assert pvc.spec.volume_name == volume_name(ds, ns) == f"tenancy-fashion-mnist.{ns}"
        assert pvc.spec.access_modes == ["ReadWriteMany"]
        assert pvc.spec.resources.requests["storage"] == "10Gi"
        assert pvc.metadata.labels[DATASET_LABEL] == "fashion-mnist"
        pv = await asyncio.to_thread(volume, api, pvc.spec.volume_name)
        assert pv.status.phase == "Bound"
        assert (pv.spec.claim_ref.namespace, pv.spec.claim_ref.name, pv.spec.claim_ref.uid) == \
            (ns, "fashion-mnist", pvc.metadata.uid)
        assert pv.spec.host_path.path == "/srv/datasets/fashion-mnist"
        assert pv.spec.capacity["storage"] == "10Gi" and pv.spec.persistent_volume_reclaim_policy == "Retain"
        assert pv.metadata.labels[NAMESPACE_LABEL] == ns
        volumes.add(pv.metadata.name)
    assert len(volumes) == 2  # a static volume binds one claim: one per namespace
    # the third namespace's job naming it is refused at submission, and nothing is made for it
    with pytest.raises(Forbidden) as refused:
        controller.admission.submit(who(controller, "carol"), training("steal", datasets=["fashion-mnist"]))
    assert str(refused.value) == f"carol may not use dataset fashion-mnist: it is not for namespace {c}"
    controller.tick()
    assert controller.store.active_workload_ids() == [] and not controller.engine.pods
    assert await asyncio.to_thread(workload_jobs, api, c) == []
    assert await asyncio.to_thread(claim, api, c) is None
    assert (ds.name, c) not in controller.datasets.wanted()


@pytest.mark.asyncio
async def test_training_jobs_and_notebook_pods_mount_it_read_only(control_plane, api, namespaces, controller,
                                                                 monkeypatch):
    """In each namespace: a training job submitted to the controller naming the dataset, admitted, its
    Job made by the backend and its pod run by kwok; a notebook submitted naming none (it gets every
    Bound dataset of its namespace), its pod made from KubeSpawner's own manifest given the workload
    JSON the controller shows. Both read back from the API server: the claim at /datasets/fashion-mnist,
    read-only, and ``TENANCY_DATASETS``."""
    from spawner.kube import TenancyKubeSpawner

    a, b, _ = namespaces
    ds = fashion_mnist(a, b)
    serve(controller, ds)
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    # KubeSpawner loads a kubeconfig when made (once per process: lru_cache), from this module global
    import kubernetes_asyncio.client
    import kubernetes_asyncio.config.kube_config as kube_config
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(control_plane.kubeconfig))
    for ns, user in ((a, "alice"), (b, "bob")):
        await state_is(controller, (ds.name, ns), "Bound")
        row = controller.admission.submit(who(controller, user), training("train", datasets=["fashion-mnist"]))
        assert row.namespace == ns
        pod = await runs(api, controller, row)
        assert mounted(pod.spec, pod.spec.containers[0]) == {MOUNT: ("fashion-mnist", True, True)}
        env = {e.name: e.value for e in pod.spec.containers[0].env}
        assert json.loads(env["TENANCY_DATASETS"]) == {"fashion-mnist": MOUNT}
        jobs = await asyncio.to_thread(batch.list_namespaced_job, ns, label_selector=f"{WORKLOAD_LABEL}={row.id}")
        (job,) = jobs.items
        spec = job.spec.template.spec
        assert mounted(spec, spec.containers[0]) == {MOUNT: ("fashion-mnist", True, True)}
        assert controller.datasets.in_use(ds.name, ns)  # a running job mounts it

        nb = controller.admission.submit(who(controller, user).as_spawner(), {"kind": "notebook", "name": "nb",
                                                                 "resources": {"requests": {"cpu": "1"}}})
        controller.tick()
        view = controller.view(nb)  # the workload JSON the service returns to the spawner
        assert view["datasets"] == [{"name": "fashion-mnist", "mountPath": MOUNT, "readOnly": True,
                                     "volume": {"persistentVolumeClaim": {"claimName": "fashion-mnist",
                                                                          "readOnly": True}}}]
        spawner = TenancyKubeSpawner(_mock=True, image="registry.invalid/notebook:1",
                                     profiles={"small": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}})
        spawner._choice = (SimpleNamespace(name=f"team-{ns}", properties={}), "small")
        spawner.place(view)
        manifest = await spawner.get_pod_manifest()
        async with kubernetes_asyncio.client.ApiClient() as serializer:
            body = serializer.sanitize_for_serialization(manifest)  # the JSON KubeSpawner sends
        body["metadata"]["namespace"] = spawner.namespace  # KubeSpawner names it in the request's path
        assert spawner.namespace == ns
        await asyncio.to_thread(controller.backend.api.create, POD, body)
        pod = await asyncio.to_thread(core.read_namespaced_pod, manifest.metadata.name, ns)
        notebook = next(c for c in pod.spec.containers if c.name == "notebook")
        assert mounted(pod.spec, notebook) == {MOUNT: ("fashion-mnist", True, True)}
        assert json.loads({e.name: e.value for e in notebook.env}["TENANCY_DATASETS"]) == {"fashion-mnist": MOUNT}


@pytest.mark.asyncio
async def test_a_claim_the_quota_forbids_is_refused_with_its_words_and_jobs_wait_until_the_quota_changes(
        api, namespaces, controller):
    a, _, c = namespaces
    core = client.CoreV1Api(api)
    quota = await no_claims_allowed(core, c)
    backend = controller.backend
    creates = []
    original = backend.api.request

    def spy(method, path, **kw):
        if method == "POST" and path == f"/api/v1/namespaces/{c}/persistentvolumeclaims":
            creates.append(path)
        return original(method, path, **kw)

    backend.api.request = spy
    ds = fashion_mnist(a, c)
    serve(controller, ds)
    _, words = await state_is(controller, (ds.name, c), "Refused")
    assert words.startswith('persistentvolumeclaims "fashion-mnist" is forbidden: exceeded quota: storage'), words
    assert "limited: persistentvolumeclaims=0" in words
    await state_is(controller, (ds.name, a), "Bound")
    assert await asyncio.to_thread(claim, api, c) is None
    problems = {k: p.message for k, p in controller.health.problems.items()}
    assert problems == {f"dataset:fashion-mnist:{c}": f"dataset fashion-mnist in {c} is refused: {words}"}
    # carol's job naming it waits, with the quota's words; nothing of it is on the cluster
    row = controller.admission.submit(who(controller, "carol"), training("needs", datasets=["fashion-mnist"]))
    await quiet_passes(controller.tick, 3)
    view = controller.view(row)
    assert (view["state"], view["reason"]) == ("Pending", "dataset-not-ready")
    assert view["message"] == f"waiting for dataset fashion-mnist: it is refused in {c}: {words}"
    assert view["pods"] == [] and not controller.engine.pods
    assert await asyncio.to_thread(workload_jobs, api, c) == []
    # the tenants are read again, nothing changed: not tried again
    tried = len(creates)
    ours = backend.datasets
    passes = ours.passes
    controller.set_tenants(list(controller.tenants))
    await until(lambda: ours.passes > passes and not ours.busy and not ours.dirty.is_set(),
                "the pass that call asked for")
    assert len(creates) == tried
    # the quota allows one claim: tried again, made and Bound, and the job starts, mounting it
    quota.spec.hard = {"persistentvolumeclaims": "1", "requests.storage": "20Gi"}
    await asyncio.to_thread(core.replace_namespaced_resource_quota, "storage", c, quota)
    await state_is(controller, (ds.name, c), "Bound")
    assert (await asyncio.to_thread(claim, api, c)).status.phase == "Bound"
    pod = await runs(api, controller, row)
    assert mounted(pod.spec, pod.spec.containers[0]) == {MOUNT: ("fashion-mnist", True, True)}
    assert controller.health.problems == {}


@pytest.mark.asyncio
async def test_a_quota_that_changes_while_the_refused_create_is_out_is_tried_again(api, namespaces, controller):
    """The race the full run met under load: the quota is raised, and the watch brings the new limits
    while the create the API server refused (by the old ones) is still on its way back. The refusal
    counts against the quota the create was made under, so the raised quota is tried again instead of
    leaving the dataset Refused for good. The test raises the quota at that moment (between the API
    server's 403 and the backend reading it), as load cannot be timed so."""
    a, _, c = namespaces
    core = client.CoreV1Api(api)
    quota = await no_claims_allowed(core, c)
    backend = controller.backend
    ours = backend.datasets
    creates = []
    original = backend.api.request

    def spy(method, path, **kw):  # on the backend's call thread
        if method != "POST" or path != f"/api/v1/namespaces/{c}/persistentvolumeclaims":
            return original(method, path, **kw)
        creates.append(path)
        try:
            return original(method, path, **kw)
        finally:
            if len(creates) == 1:  # refused by the old limits; the watch sees the new ones before we go on
                before = ours.quota_signature(c)
                quota.spec.hard = {"persistentvolumeclaims": "1"}
                core.replace_namespaced_resource_quota("storage", c, quota)
                wait_for(lambda: ours.quota_signature(c) != before, "the watch's quota changed")

    backend.api.request = spy
    ds = fashion_mnist(a, c)
    serve(controller, ds)
    await state_is(controller, (ds.name, c), "Bound")
    assert len(creates) == 2, creates
    assert (await asyncio.to_thread(claim, api, c)).status.phase == "Bound"


@pytest.mark.asyncio
async def test_a_namespace_taken_out_loses_its_claim_once_nothing_uses_it(api, namespaces, controller):
    a, b, _ = namespaces
    serve(controller)
    controller.datasets.apply(fashion_mnist(a, b))  # through the API (PUT)
    for ns in (a, b):
        await state_is(controller, ("fashion-mnist", ns), "Bound")
    row = controller.admission.submit(who(controller, "bob"), training("reads", datasets=["fashion-mnist"]))
    await runs(api, controller, row)  # bob's job in b runs, mounting it
    ds = fashion_mnist(a)
    controller.datasets.apply(ds)  # b taken out
    assert ("fashion-mnist", b) not in controller.datasets.wanted()
    ours = controller.backend.datasets
    passes = ours.passes
    await until(lambda: ours.passes > passes + 2, "a few passes (rechecks while in use)", tick=controller.tick)
    assert await asyncio.to_thread(claim, api, b) is not None
    assert (ds.name, b) in ours.held
    controller.cancel(ADMIN, row)  # the job ends: nothing uses it, removed at the next recheck
    await until(lambda: claim(api, b) is None and volume(api, volume_name(ds, b)) is None,
                f"the claim and volume of {b} to go", tick=controller.tick, in_thread=True)
    assert not controller.datasets.in_use(ds.name, b)
    assert (await asyncio.to_thread(claim, api, a)).status.phase == "Bound"  # the other namespace keeps its own
    assert (await asyncio.to_thread(volume, api, volume_name(ds, a))) is not None
    assert controller.datasets.state(ds.name, a) == ("Bound", None)


@pytest.mark.asyncio
async def test_a_deleted_claim_is_made_again_and_binds_its_volume_again(api, namespaces, controller):
    a, _, _ = namespaces
    ds = fashion_mnist(a)
    serve(controller, ds)
    await state_is(controller, (ds.name, a), "Bound")
    core = client.CoreV1Api(api)
    old = (await asyncio.to_thread(claim, api, a)).metadata.uid
    await asyncio.to_thread(core.delete_namespaced_persistent_volume_claim, "fashion-mnist", a)

    def remade():
        pvc = claim(api, a)
        return pvc is not None and pvc.metadata.uid != old and pvc.status.phase == "Bound" and pvc

    pvc = await until(remade, f"the claim in {a} made again and Bound", 60, in_thread=True)
    pv = await asyncio.to_thread(volume, api, volume_name(ds, a))
    assert pv.status.phase == "Bound" and pv.spec.claim_ref.uid == pvc.metadata.uid
    await state_is(controller, (ds.name, a), "Bound")


@pytest.mark.asyncio
async def test_claim_and_path_sources(api, namespaces, controller):
    """``claim``: Pending with what is missing until that claim exists and is Bound. ``path``: Bound."""
    a, _, _ = namespaces
    mine = parse_dataset({"apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": "mine"},
                          "spec": {"namespaces": [a], "source": {"claim": "fashion-demo-pvc"}}})
    folder = parse_dataset({"apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset",
                            "metadata": {"name": "folder"},
                            "spec": {"namespaces": [a], "source": {"path": "/srv/data/fashion"}}})
    serve(controller, mine, folder)
    await state_is(controller, ("folder", a), "Bound")
    _, message = await state_is(controller, ("mine", a), "Pending")
    assert message == f"there is no PersistentVolumeClaim fashion-demo-pvc in {a}; make it there (the dataset names it)"
    assert claim_name(mine) == "fashion-demo-pvc"
    # the seed's own PV and PVC, made by an admin
    core = client.CoreV1Api(api)
    pv_name = f"fashion-demo-pv-{a}"
    await asyncio.to_thread(core.create_persistent_volume, {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "labels": {NAMESPACE_LABEL: a}},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                 "hostPath": {"path": "/srv/datasets/fashion-mnist"}}})
    await asyncio.to_thread(core.create_namespaced_persistent_volume_claim, a, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "fashion-demo-pvc"},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv_name,
                 "resources": {"requests": {"storage": "10Gi"}}}})
    await state_is(controller, ("mine", a), "Bound")
    assert await asyncio.to_thread(volume, api, volume_name(mine, a)) is None  # nothing of ours made for it


def apply_crd(api, path: Path) -> None:
    ext = client.ApiextensionsV1Api(api)
    body = yaml.safe_load(path.read_text())
    try:
        ext.create_custom_resource_definition(body)
    except ApiException as err:
        if err.status != 409:
            raise


@pytest.mark.asyncio
async def test_dataset_objects_on_the_cluster_are_declared_in_the_service(api, namespaces, controller):
    """The chart's CRD applied; the backend follows the Dataset objects and hands them to the room
    (``from_cluster``): every good one is declared, of origin ``cluster``, and provisioned; a bad one is
    one line on the health and left out; a deleted one goes."""
    a, b, _ = namespaces
    serve(controller)
    await asyncio.to_thread(apply_crd, api, REPO / "helm" / "crds" / "dataset.yaml")
    custom = client.CustomObjectsApi(api)
    group, version, plural = "tenancy.jupyter.org", "v1alpha1", "datasets"
    suffix = a.rsplit("-", 1)[1]
    good, bad = f"fashion-{suffix}", f"broken-{suffix}"

    def create(name, spec):
        obj = {"apiVersion": f"{group}/{version}", "kind": "Dataset", "metadata": {"name": name}, "spec": spec}
        return custom.create_cluster_custom_object(group, version, plural, obj)

    await until(lambda: _try(create, good, {"namespaces": [a, b], "source": {"path": "/srv/data/fashion"},
                                            "mountPath": "/datasets/f"}), "the CRD served", in_thread=True)
    # the schema lets it through (a path is absolute), the service's own check does not (..)
    await asyncio.to_thread(create, bad, {"namespaces": [a], "source": {"path": "/srv/../etc"}})
    task = asyncio.ensure_future(controller.backend.dataset_objects.run())
    room, health = controller.datasets, controller.health
    try:
        await until(lambda: good in room.declared, "the Dataset object declared in the service",
                    show=lambda: sorted(room.declared))
        assert room.origin(good) == "cluster"
        assert bad not in room.declared and room.origin(bad) is None
        found = await until(lambda: health.problems.get("dataset-objects"), "the bad one on the health")
        assert found.message.startswith(f"the cluster's Dataset {bad} is not used: Dataset {bad}: spec.source.path")
        assert "'..'" in found.message and not found.blocking
        ds = room.declared[good]
        assert (ds.namespaces, ds.mount_path, ds.read_only) == ((a, b), "/datasets/f", True)
        assert sorted(k for k in room.wanted() if k[0] == good) == [(good, a), (good, b)]
        for ns in (a, b):  # the backend was told of it and answers for it
            await state_is(controller, (good, ns), "Bound")
        await asyncio.to_thread(custom.delete_cluster_custom_object, group, version, plural, bad)
        await until(lambda: "dataset-objects" not in health.problems, "the problem gone with the object")
        await asyncio.to_thread(custom.delete_cluster_custom_object, group, version, plural, good)
        await until(lambda: good not in room.declared, "the deleted one gone from the service")
        assert room.origin(good) is None and not [k for k in room.wanted() if k[0] == good]
    finally:
        task.cancel()
        for name in (good, bad):
            try:
                await asyncio.to_thread(custom.delete_cluster_custom_object, group, version, plural, name)
            except ApiException:
                pass


def _try(fn, *args):
    try:
        return fn(*args)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
