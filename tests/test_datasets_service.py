"""Datasets in the service (issue 20): the controller's room and admission, on a real controller,
engine, store and local backend (its folders' states are the backend's real answers).

Who may use a dataset (teams resolved through the tenants), where each comes from and who
may change it, what survives a restart, what a workload names (and the one-line 400s and
the 403s), how a workload naming a dataset that is not ready is held back before the engine
(neither admitted nor counted) and let go once it is, what a workload mounts, and
``/health``'s problem for a refused one. The API of the same is in test_datasets_api.py.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from builders import node, tree
from hub_ext.backends.local import LocalBackend
from hub_ext.backends.local.datasets import group_name
from hub_ext.quota import ValidationError
from hub_ext.quota.dataset import parse_dataset
from hub_ext.service.controller import Controller, Forbidden, Identity
from hub_ext.service.datasets import Conflict, NotFound
from hub_ext.service.store import Store
from hub_ext.service.workloads import check_body
from hub_ext.tenants import tenants_from_groups

TREE = tree(node("root", {"cpu": 12}, {"cpu": 12}, children=[
    node("a", {"cpu": 4}, {"cpu": 8}, ["team-a"]), node("b", {"cpu": 4}, {"cpu": 8}, ["team-b"]),
    node("d", {"cpu": 4}, {"cpu": 8}, ["team-d"])]))
GROUPS = [{"name": t, "users": [u], "properties": {"tenancy.namespace": t}}
          for t, u in (("team-a", "alice"), ("team-b", "bob"), ("team-d", "dave"))]
NAMES = ("svc-fashion", "svc-other", "svc-pv", "svc-late", "svc-all")


@pytest.fixture(scope="module")
def folders():
    """Dataset folders where every account may cross the parents (as /srv would be), removed after;
    so are the groups the backend makes for them (running as root)."""
    top = Path(tempfile.mkdtemp(prefix="tenancy-ds-unit-", dir="/tmp"))
    os.chmod(top, 0o711)
    yield top
    shutil.rmtree(top, ignore_errors=True)
    if os.geteuid() == 0:
        for name in NAMES:
            subprocess.run(["groupdel", group_name(name)], capture_output=True)


def dataset(name, folder=None, **spec) -> dict:
    body = {"teams": ["team-a"], "source": {"path": str(folder)} if folder else {}, **spec}
    return {"apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": name}, "spec": body}


def make(tmp_path, folders, datasets=(), db=None) -> Controller:
    backend = LocalBackend(nodes_config=[{"name": "n1", "allocatable": {"cpu": "8", "memory": "32Gi"}}],
                           data_dir=str(tmp_path / "data"))
    c = Controller(store=Store(db or f"sqlite:///{tmp_path}/t.sqlite"), tree=TREE, backend=backend,
                   default_requests={"training": {"cpu": "1"}, "notebook": {"cpu": "1"}})
    c.set_tenants(tenants_from_groups(GROUPS, TREE))
    c.datasets.configure([parse_dataset(d) for d in datasets])
    c.datasets.start()
    return c


def who(c, name) -> Identity:
    return Identity(name=name, tenants=[t for t in c.tenants if name in t.members])


def folder(folders, name) -> Path:
    path = folders / name
    path.mkdir(exist_ok=True)
    (path / "README").write_text(name)
    return path


# -- who may use what, where each comes from --------------------------------------------------

def test_wanted_resolves_teams_through_the_tenants(tmp_path, folders):
    c = make(tmp_path, folders, [
        dataset("svc-fashion", folder(folders, "fashion"), teams=["team-a", "team-b"], mountPath="/datasets/f"),
        dataset("svc-all", folder(folders, "all"), teams="*", namespaces=["outside"]),
    ])
    assert sorted(c.datasets.wanted()) == [
        ("svc-all", "outside"), ("svc-all", "team-a"), ("svc-all", "team-b"), ("svc-all", "team-d"),
        ("svc-fashion", "team-a"), ("svc-fashion", "team-b")]
    # the backend answered for every pair: the folders are there, so each is Bound
    assert {k: s for k, (s, _) in c.datasets.states.items()} == {k: "Bound" for k in c.datasets.wanted()}
    # a team leaves: its namespace is no longer wanted, nor its state kept
    c.set_tenants(tenants_from_groups([g for g in GROUPS if g["name"] != "team-b"], TREE))
    assert ("svc-fashion", "team-b") not in c.datasets.wanted()
    assert ("svc-fashion", "team-b") not in c.datasets.states


def test_api_made_datasets_survive_a_restart_and_the_configuration_wins_a_name(tmp_path, folders):
    db = f"sqlite:///{tmp_path}/keep.sqlite"
    c = make(tmp_path, folders, db=db)
    c.datasets.apply(parse_dataset(dataset("svc-other", folder(folders, "other"))))
    c.datasets.apply(parse_dataset(dataset("svc-late", folder(folders, "late"), mountPath="/datasets/late")))
    c.store.close()
    again = make(tmp_path, folders, [dataset("svc-late", folder(folders, "late"), mountPath="/data/late")], db=db)
    assert {n: again.datasets.origin(n) for n in again.datasets.declared} == {"svc-late": "config", "svc-other": "api"}
    assert again.datasets.declared["svc-late"].mount_path == "/data/late"


def test_only_the_place_a_dataset_came_from_may_change_it(tmp_path, folders):
    c = make(tmp_path, folders, [dataset("svc-fashion", folder(folders, "fashion"))])
    mine = parse_dataset(dataset("svc-fashion", folder(folders, "fashion"), readOnly=False))
    with pytest.raises(Conflict, match=r"declared in the service's configuration \(TenancyService.datasets\): "
                                       "change it there"):
        c.datasets.apply(mine)
    with pytest.raises(Conflict, match="change it there"):
        c.datasets.delete("svc-fashion")
    with pytest.raises(NotFound, match="there is no dataset nope"):
        c.datasets.delete("nope")
    cluster = [parse_dataset(dataset("svc-other", folder(folders, "other"), mountPath="/datasets/o"))]
    c.datasets.from_cluster(cluster)
    assert c.datasets.origin("svc-other") == "cluster"
    with pytest.raises(Conflict, match="kubectl edit dataset svc-other"):
        c.datasets.apply(parse_dataset(dataset("svc-other", folder(folders, "other"))))
    c.datasets.from_cluster([])  # the full set each time: gone from the cluster, gone here
    assert "svc-other" not in c.datasets.declared
    with pytest.raises(ValidationError, match="mountPath /datasets/svc-fashion is also Dataset svc-fashion's"):
        c.datasets.apply(parse_dataset(dataset("svc-all", folder(folders, "all"), mountPath="/datasets/svc-fashion")))
    assert "svc-all" not in c.datasets.declared  # nothing half-made


def test_a_source_the_local_backend_cannot_mount_is_refused_and_health_says_so(tmp_path, folders):
    pv = dataset("svc-pv", source={"persistentVolume": {"capacity": {"storage": "1Gi"}, "hostPath": {"path": "/x"}}})
    c = make(tmp_path, folders, [pv])
    assert c.datasets.state("svc-pv", "team-a") == (
        "Refused", "the local backend mounts folders only (a path source); dataset svc-pv's source is a "
                   "persistentVolume")
    problems = [p["message"] for p in c.health.report()["problems"]]
    assert problems == ["dataset svc-pv in team-a is refused: the local backend mounts folders only (a path source); "
                        "dataset svc-pv's source is a persistentVolume"]
    assert c.health.status == "degraded"  # a problem to see, nothing blocked
    c.set_tenants([])  # team-a is gone: the pair is no longer wanted, nor its problem
    assert c.health.report()["problems"] == []


# -- what a workload names ---------------------------------------------------------------------

@pytest.mark.parametrize("datasets, message", [
    ("svc-fashion", "workload: datasets: expected a list, got a string"),
    (["Bad_Name"], "workload: datasets[0].name: 'Bad_Name' is not a valid dataset name"),
    (["svc-fashion:relative/path"], "workload: datasets[0].mountPath: 'relative/path' is not an absolute path"),
    (["svc-fashion:/data/../etc"], "workload: datasets[0].mountPath: '/data/../etc' goes up with '..'"),
    (["svc-fashion:/home/jovyan"], "workload: datasets[0].mountPath: /home/jovyan would cover the home"),
    (["svc-fashion:/"], "workload: datasets[0].mountPath: / would cover the home"),
    ([{"name": "svc-fashion", "path": "/x"}], "workload: datasets[0]: unknown field 'path'"),
    ([7], "workload: datasets[0]: expected a mapping"),
    (["svc-fashion", "svc-fashion:/x"], "workload: datasets names svc-fashion twice"),
    (["svc-fashion:/d", {"name": "svc-other", "mountPath": "/d/o"}],
     "workload: datasets: svc-other's mountPath /d/o clashes with svc-fashion's /d"),
], ids=["not-a-list", "bad-name", "relative", "dotdot", "home", "root", "unknown-key", "number", "twice", "clash"])
def test_bad_datasets_in_a_body_are_one_line(datasets, message):
    with pytest.raises(ValidationError) as err:
        check_body({"command": ["true"], "datasets": datasets})
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)


def test_the_three_ways_to_name_a_dataset():
    body = check_body({"command": ["true"], "datasets": ["a", "b:/data/b/", {"name": "c", "mountPath": "/c"}]})
    assert body["datasets"] == [{"name": "a"}, {"name": "b", "mountPath": "/data/b"}, {"name": "c", "mountPath": "/c"}]
    assert "datasets" not in check_body({"command": ["true"]})  # not given: the defaults


def test_naming_a_dataset_that_is_missing_or_not_for_the_namespace_is_403(tmp_path, folders):
    c = make(tmp_path, folders, [dataset("svc-fashion", folder(folders, "fashion")),
                                 dataset("svc-other", folder(folders, "other"), mountPath="/datasets/f/o")])
    with pytest.raises(Forbidden, match="^dave may not use dataset svc-fashion: it is not for namespace team-d$"):
        c.submit(who(c, "dave"), {"command": ["true"], "datasets": ["svc-fashion"]})
    with pytest.raises(Forbidden, match="^alice may not use dataset nope: there is no dataset nope$"):
        c.submit(who(c, "alice"), {"command": ["true"], "datasets": ["nope"]})
    # the datasets' own mount paths clash once both are mounted together: give one a path of its own
    with pytest.raises(ValidationError, match="svc-other would be mounted at /datasets/f/o, which clashes with "
                                              "svc-fashion at /datasets/f"):
        c.submit(who(c, "alice"), {"command": ["true"], "datasets": ["svc-fashion:/datasets/f", "svc-other"]})
    assert c.store.active_workload_ids() == [] and not c.engine.pods  # nothing half-made


@pytest.mark.asyncio
async def test_work_naming_a_dataset_not_ready_is_held_before_the_engine_and_starts_once_it_is(tmp_path, folders):
    late = folders / "late-folder"
    shutil.rmtree(late, ignore_errors=True)
    c = make(tmp_path, folders, [dataset("svc-late", late, teams=["team-a", "team-b"])])
    assert c.datasets.state("svc-late", "team-a")[0] == "Pending"
    row = c.submit(who(c, "alice").as_spawner(), {"kind": "notebook", "name": "needs", "resources": {"requests": {"cpu": "3"}},
                                     "datasets": ["svc-late"]})
    c.tick()
    view = c.view(row, events=True)
    assert (view["state"], view["reason"]) == ("Pending", "dataset-not-ready")
    assert view["message"] == f"waiting for dataset svc-late: it is pending in team-a: the folder {late} does not " \
                              "exist; make it (and put the data there)"
    assert view["pods"] == [] and not c.engine.pods  # neither admitted nor counted
    assert c.engine.quota.nodes["a"].used.get("cpu", 0) == 0
    assert view["datasets"] == [{"name": "svc-late", "mountPath": "/datasets/svc-late", "readOnly": True,
                                 "volume": {"hostPath": {"path": str(late), "type": "Directory"}}}]
    c.tick()
    assert [e["type"] for e in c.view(row, events=True)["events"]].count("waiting") == 1  # said once
    # a dry run says the same, for a job too
    dry = c.preview_submit(who(c, "bob"), {"command": ["true"], "replicas": 2, "datasets": ["svc-late"]})
    assert (dry["state"], dry["reason"]) == ("Pending", "dataset-not-ready")
    # other work is not held: bob's notebook without datasets starts at once
    free = c.submit(who(c, "bob").as_spawner(), {"kind": "notebook"})
    c.tick()
    assert c.view(free)["state"] == "Running"
    folder(folders, "late-folder")
    c.datasets.changed()  # what a tenants refresh does every few seconds
    assert c.datasets.state("svc-late", "team-a") == ("Bound", None)
    c.tick()
    view = c.view(row)
    assert (view["state"], len(view["pods"]), view["reason"]) == ("Running", 1, None)
    assert row.id not in c.datasets.held
    assert c.datasets.in_use("svc-late", "team-a") and not c.datasets.in_use("svc-late", "team-b")
    assert c.datasets.view(c.datasets.declared["svc-late"])["inUse"] == {"team-a": 1, "team-b": 0}
    await asyncio.sleep(0)  # the backend's start of each notebook (the spawner starts its server)
    for r in (row, free):
        c.cancel(Identity(name="admin", admin=True), r)


def test_work_naming_no_dataset_mounts_every_bound_one_of_its_namespace(tmp_path, folders):
    pv = dataset("svc-pv", source={"persistentVolume": {"capacity": {"storage": "1Gi"}, "hostPath": {"path": "/x"}}},
                 mountPath="/datasets/pv")
    c = make(tmp_path, folders, [dataset("svc-fashion", folder(folders, "fashion"), teams=["team-a", "team-d"]),
                                 dataset("svc-other", folder(folders, "other"), teams=["team-b"], mountPath="/o"), pv])
    nb = c.submit(who(c, "alice").as_spawner(), {"kind": "notebook"})
    job = c.submit(who(c, "dave"), {"command": ["true"]})
    none = c.submit(who(c, "alice"), {"command": ["true"], "datasets": []})
    assert [d["name"] for d in c.view(nb)["datasets"]] == ["svc-fashion"]  # svc-pv is Refused here: not mounted
    assert [d["name"] for d in c.view(job)["datasets"]] == ["svc-fashion"]
    assert c.view(none)["datasets"] == []
    mine = c.submit(who(c, "alice"), {"command": ["true"], "datasets": ["svc-fashion:/data/f"]})
    assert c.view(mine)["datasets"][0]["mountPath"] == "/data/f"
    for r in (nb, job, none, mine):
        c.cancel(Identity(name="admin", admin=True), r)


# -- the service's configuration ------------------------------------------------------------------

@pytest.mark.parametrize("datasets, message", [
    ([dataset("svc-a", "/srv/a"), dataset("svc-b", "/srv/b", mountPath="/datasets/svc-a")],
     "TenancyService.datasets: Dataset svc-b: mountPath /datasets/svc-a is also Dataset svc-a's"),
    ([dataset("svc-a", "/srv/a"), dataset("svc-a", "/srv/b")], "TenancyService.datasets: Dataset svc-a: declared twice"),
    ([dataset("svc-a", "/srv/a", teams=[], namespaces=[])],
     "TenancyService.datasets[0]: Dataset svc-a: spec names no teams and no namespaces"),
    ([{**dataset("svc-a"), "spec": {"teams": ["t"], "source": {"path": "/a", "claim": "c"}}}],
     "TenancyService.datasets[0]: Dataset svc-a: spec.source: give exactly one of persistentVolume, claim, path "
     "(got claim and path)"),
], ids=["mount-clash", "twice", "nobody", "two-sources"])
def test_a_bad_configured_dataset_stops_the_service_with_one_line(tmp_path, datasets, message):
    config = tmp_path / "tenancy_config.py"
    config.write_text(f"c.TenancyService.datasets = {datasets!r}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-m", "hub_ext.cli", "serve", "--config", str(config), "--port", "0",
                           "--db", f"sqlite:///{tmp_path}/t.sqlite", f"--LocalBackend.data_dir={tmp_path / 'data'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tenancy serve: error: {message}"), done.stderr


def test_a_dry_run_says_what_each_namespace_would_get_and_what_its_quota_refuses(tmp_path, folders):
    from hub_ext.quota import parse_object
    from hub_ext.service.dataset_handlers import provision

    pv = {"capacity": {"storage": "10Gi"}, "hostPath": {"path": "/srv/fashion"}}
    old = parse_dataset(dataset("svc-pv", teams=["team-a", "team-b"], source={"persistentVolume": pv}))
    c = make(tmp_path, folders, [dataset("svc-pv", teams=["team-a", "team-b"], source={"persistentVolume": pv})])
    c.apply_object(parse_object({"apiVersion": "v1", "kind": "ResourceQuota",
                                 "metadata": {"name": "no-claims", "namespace": "team-d"},
                                 "spec": {"hard": {"persistentvolumeclaims": "0"}}}))
    new = parse_dataset(dataset("svc-pv", teams=["team-b", "team-d"], source={"persistentVolume": pv}))
    assert provision(c, new, old) == [
        {"namespace": "team-a", "action": "remove", "refused": None},
        {"namespace": "team-b", "action": "keep", "refused": None},
        {"namespace": "team-d", "action": "create", "refused": 'persistentvolumeclaims "svc-pv" is forbidden: '
                                                           "exceeded quota: no-claims, requested: "
                                                           "persistentvolumeclaims=1, used: persistentvolumeclaims=0, "
                                                           "limited: persistentvolumeclaims=0"}]
    bigger = parse_dataset(dataset("svc-pv", teams=["team-b"], source={"persistentVolume": pv}, size="5Gi"))
    assert [p["action"] for p in provision(c, bigger, old)] == ["remove", "create"]  # a new size: made anew
    assert c.datasets.declared["svc-pv"] == old  # nothing changed


def test_the_local_backend_cannot_accelerate_and_says_why(tmp_path, folders):
    """Acceleration needs Fluid on Kubernetes: the local backend's sentence is the view's ``why`` and the
    409 (Conflict) of an accelerate; nothing is chosen, a report for a dataset not chosen is ignored, and
    work mounts the dataset's own folder."""
    c = make(tmp_path, folders, [dataset("svc-fashion", folder(folders, "fashion"))])
    why = "the local backend reads datasets from folders; acceleration needs Fluid on Kubernetes"
    assert c.backend.acceleration() == why
    ds = c.datasets.declared["svc-fashion"]
    assert c.datasets.view(ds)["acceleration"] == {"available": False, "why": why, "enabled": False, "state": {}}
    with pytest.raises(Conflict) as err:
        c.datasets.accelerate("svc-fashion", True)
    assert str(err.value) == f"Dataset svc-fashion cannot be accelerated: {why}"
    with pytest.raises(NotFound):
        c.datasets.accelerate("svc-nothing", False)
    assert c.datasets.accelerate("svc-fashion", False) is False  # never chosen: nothing changes
    c.datasets.set_acceleration("svc-fashion", "team-a", "Bound", None, "svc-fashion-accelerated")
    assert c.datasets.fast == {} and c.store.setting("datasets-accelerated") in (None, [])
