"""Datasets in the demo (issue 20), for real: the demo's hub run as root, as CI runs it.

The demo declares fashion-mnist for team-a and team-b: a folder with a sample the demo
makes. A job of alice's (team-a) reads a file of it through ``TENANCY_DATASETS``; a job
of dave's (team-d, not allowed) cannot read it by any path: not the folder, not a file in
it by its full path, not alice's link to it. Then the API on the same hub: who reads
which datasets (``/me`` too), admins' writes with their dry run and their 409s, the audit
trail, ``/health``'s problem for a refused dataset, and a job naming a dataset that is
not ready held back, Pending, until its folder appears.

One hub for the datasets modules (conftest.py's ``datasets_hub``: the hub tier is CI's long pole); its work dir is one other
accounts may cross (``/tmp/tenancy-datasets-*``, 0711, as ``/srv`` would be).
"""

from __future__ import annotations

import grp
import json
import os

import pytest

from demo_hub import svc
from waiting import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="per-user accounts need root (CI and the project's "
                                                          "machine run the tests as root)")

#: What a job runs: tries each path, prints one JSON line {path: first bytes or "denied: why"}.
PROBE = r'''
import json, os
paths = json.loads(os.environ.get("PROBE", "[]"))
datasets = json.loads(os.environ["TENANCY_DATASETS"])
if "fashion-mnist" in datasets:
    paths.append(os.path.join(datasets["fashion-mnist"], "labels.json"))
out = {"datasets": datasets, "groups": os.getgroups(), "reads": {}}
for path in paths:
    try:
        if os.path.isdir(path):
            out["reads"][path] = "listed " + ",".join(sorted(os.listdir(path)))
        else:
            with open(path, "rb") as f:
                out["reads"][path] = "read " + f.read(40).decode("latin-1")
    except OSError as err:
        out["reads"][path] = f"denied: {err.strerror}"
print(json.dumps(out), flush=True)
'''


@pytest.fixture(scope="module")
def hub(datasets_hub):
    return datasets_hub  # one hub for the datasets modules (conftest.py)


def _finished(hub, user: str, wid: str, timeout: float = 90) -> dict:
    return wait_for(lambda: (lambda w: w if w["state"] in ("Succeeded", "Failed") else None)(
        svc(hub, user, "GET", f"/workloads/{wid}")[1]), f"workload {wid} to end", timeout=timeout)


def _run(hub, user: str, **spec) -> tuple[dict, dict]:
    """Submit a probe job as ``user``, wait for its end: (the workload, the probe's report)."""
    status, job = svc(hub, user, "POST", "/workloads", {"resources": {"requests": {"cpu": "1"}}, "script": PROBE,
                                                         **spec})
    assert status == 201, job
    done = _finished(hub, user, job["id"])
    status, logs = svc(hub, user, "GET", f"/workloads/{job['id']}/logs")
    assert done["state"] == "Succeeded", (done, logs)
    return done, json.loads(next(line for line in logs.splitlines() if line.startswith("{")))


def test_alice_reads_the_dataset_through_tenancy_datasets_and_dave_cannot_by_any_path(hub):
    folder = hub.state / "datasets" / "fashion-mnist"
    done, alice = _run(hub, "alice", name="reads-fashion")
    link = alice["datasets"]["fashion-mnist"]
    assert link.endswith("/datasets/fashion-mnist") and os.path.isabs(link), alice
    assert os.path.realpath(link) == str(folder)
    assert alice["reads"][os.path.join(link, "labels.json")].startswith('read {"labels": [0, 1, 2'), alice
    assert [d["name"] for d in done["datasets"]] == ["fashion-mnist"]  # what it mounted, in its view
    # dave's team may not use it: his job mounts nothing, and every way in is closed
    paths = [str(folder), str(folder / "labels.json"), str(folder / "images.u8"), link,
             os.path.join(link, "labels.json")]
    done, dave = _run(hub, "dave", name="peeks", env={"PROBE": json.dumps(paths)})
    assert dave["datasets"] == {} and done["datasets"] == []
    assert {p: r for p, r in dave["reads"].items() if not r.startswith("denied: Permission denied")} == {}, dave
    assert set(dave["reads"]) == set(paths)
    # naming it is refused at submission, never mounted
    status, body = svc(hub, "dave", "POST", "/workloads", {"command": ["true"], "datasets": ["fashion-mnist"]})
    assert (status, body["error"]) == (403, "dave may not use dataset fashion-mnist: it is not for namespace team-d")


def test_who_reads_which_datasets(hub):
    status, mine = svc(hub, "alice", "GET", "/datasets")
    assert status == 200 and [d["name"] for d in mine["datasets"]] == ["fashion-mnist"]
    fashion = mine["datasets"][0]
    assert fashion["status"] == {"team-a": {"state": "Bound", "message": None}}  # her namespace's only
    assert (fashion["origin"], fashion["namespaces"], fashion["source"]["kind"]) == \
        ("config", ["team-a", "team-b"], "path")
    assert "audit" not in mine
    assert svc(hub, "dave", "GET", "/datasets")[1]["datasets"] == []
    status, body = svc(hub, "dave", "GET", "/datasets/fashion-mnist")
    assert (status, body["error"]) == (404, "there is no dataset fashion-mnist that dave's teams may use")
    status, everything = svc(hub, "admin", "GET", "/datasets/fashion-mnist")
    assert set(everything["status"]) == {"team-a", "team-b"}
    status, me = svc(hub, "alice", "GET", "/me")
    assert [(d["name"], d["state"], d["mountPath"], d["readOnly"]) for d in me["datasets"]] == \
        [("fashion-mnist", "Bound", "/datasets/fashion-mnist", True)]


def _dataset(name: str, **spec) -> dict:
    return {"apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": name},
            "spec": {"teams": ["team-c"], **spec}}


def test_admins_write_datasets_and_every_change_is_audited(hub):
    scratch = str(hub.state / "datasets" / "scratch")
    os.makedirs(scratch, exist_ok=True)
    body = _dataset("scratch", source={"path": scratch}, readOnly=False)
    status, err = svc(hub, "carol", "PUT", "/datasets/scratch", body)
    assert (status, err["error"]) == (403, "only admins may change datasets (carol asked to change scratch)")
    status, dry = svc(hub, "admin", "PUT", "/datasets/scratch?dryRun=true", body)
    assert status == 200 and dry["dryRun"] is True, dry
    assert dry["provision"] == [{"namespace": "team-c", "action": "create", "refused": None}]
    assert svc(hub, "admin", "GET", "/datasets/scratch")[0] == 404  # nothing changed
    status, made = svc(hub, "admin", "PUT", "/datasets/scratch", body)
    assert status == 200 and (made["origin"], made["readOnly"]) == ("api", False), made
    status, err = svc(hub, "admin", "PUT", "/datasets/other", body)
    assert (status, err["error"]) == (400, "Dataset scratch: metadata.name must be other, the name in the address")
    status, err = svc(hub, "admin", "PUT", "/datasets/scratch", _dataset("scratch", source={"path": "rel"}))
    assert (status, err["error"]) == (400, "Dataset scratch: spec.source.path: 'rel' is not an absolute path "
                                           "(start it with /)")
    status, err = svc(hub, "admin", "PUT", "/datasets/fashion-mnist", _dataset("fashion-mnist", source={"path": "/x"}))
    assert status == 409 and "change it there and restart the service" in err["error"], err
    status, err = svc(hub, "admin", "DELETE", "/datasets/fashion-mnist")
    assert status == 409
    assert svc(hub, "carol", "GET", "/me")[1]["datasets"][0]["name"] == "scratch"
    assert svc(hub, "admin", "DELETE", "/datasets/scratch") == (200, {"deleted": "scratch"})
    assert svc(hub, "admin", "DELETE", "/datasets/scratch")[0] == 404
    audit = svc(hub, "admin", "GET", "/datasets")[1]["audit"]
    assert [(a["kind"], a["by"], a["message"]) for a in audit[:2]] == [
        ("dataset", "admin", "admin changed datasets: removed dataset scratch"),
        ("dataset", "admin", "admin changed datasets: added dataset scratch for team-c")]


def test_a_refused_dataset_is_a_health_problem_and_work_waits_for_a_folder_to_appear(hub):
    pv = _dataset("volume", source={"persistentVolume": {"capacity": {"storage": "1Gi"}, "hostPath": {"path": "/x"}}},
                  mountPath="/datasets/v")
    assert svc(hub, "admin", "PUT", "/datasets/volume", pv)[0] == 200
    problems = hub.request("GET", "/services/tenancy/api/v1/health").json()["problems"]
    assert [p["message"] for p in problems if p["check"].startswith("dataset:")] == [
        "dataset volume in team-c is refused: the local backend mounts folders only (a path source); dataset "
        "volume's source is a persistentVolume"]
    assert svc(hub, "admin", "DELETE", "/datasets/volume")[0] == 200
    later = hub.state / "datasets" / "later"
    assert svc(hub, "admin", "PUT", "/datasets/later", _dataset("later", source={"path": str(later)}))[0] == 200
    status, job = svc(hub, "carol", "POST", "/workloads", {"script": PROBE, "datasets": ["later:/data/later"],
                                                            "resources": {"requests": {"cpu": "1"}}})
    assert status == 201 and (job["state"], job["reason"]) == ("Pending", "dataset-not-ready"), job
    assert job["message"] == f"waiting for dataset later: it is pending in team-c: the folder {later} does not " \
                             "exist; make it (and put the data there)"
    assert job["pods"] == [] and job["datasets"][0]["mountPath"] == "/data/later"
    later.mkdir()
    (later / "note.txt").write_text("here now")
    os.chmod(later / "note.txt", 0o644)
    done = _finished(hub, "carol", job["id"])  # the next tenants refresh tells the backend: Bound, released
    _, logs = svc(hub, "carol", "GET", f"/workloads/{job['id']}/logs")
    report = json.loads(next(line for line in logs.splitlines() if line.startswith("{")))
    assert done["state"] == "Succeeded" and list(report["datasets"]) == ["later"], (done, report)
    assert report["reads"] == {}  # the probe only reads fashion-mnist; the link is there:
    assert os.path.realpath(report["datasets"]["later"]) == str(later)
    assert svc(hub, "admin", "DELETE", "/datasets/later")[0] == 200


def test_alices_notebook_finds_the_dataset_in_her_home_and_in_its_environment(hub):
    from demo_hub import token

    status = hub.start_server("alice", options={"profile": "small"}, token=token(hub, "alice"), check=False)[0]
    assert status in (201, 202)
    hub.wait_server_ready("alice", timeout=90)
    try:
        pid = hub.api("GET", "/users/alice")[1]["servers"][""]["state"]["pid"]
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        home = env[b"HOME"].decode()
        datasets = json.loads(env[b"TENANCY_DATASETS"])
        assert datasets == {"fashion-mnist": f"{home}/datasets/fashion-mnist"}
        assert os.readlink(datasets["fashion-mnist"]) == str(hub.state / "datasets" / "fashion-mnist")
        with open(f"/proc/{pid}/status") as f:
            groups = next(line for line in f if line.startswith("Groups:")).split()[1:]
        assert str(grp.getgrnam("tenancy-ds-fashion-mnist").gr_gid) in groups  # her server may enter it
    finally:
        hub.stop_server("alice", timeout=60)


LOCAL_CANNOT = "the local backend reads datasets from folders; acceleration needs Fluid on Kubernetes"


def test_accelerate_on_the_local_backend_says_why_not(hub):
    """The page's button: ``acceleration`` says the local backend cannot, and why; an admin's accelerate is a
    409 with that sentence (its dry run says so too), nothing is chosen, nothing audited; only admins may."""
    status, fashion = svc(hub, "alice", "GET", "/datasets/fashion-mnist")
    assert status == 200
    assert fashion["acceleration"] == {"available": False, "why": LOCAL_CANNOT, "enabled": False, "state": {}}
    status, err = svc(hub, "alice", "POST", "/datasets/fashion-mnist/accelerate")
    assert (status, err["error"]) == (403, "only admins may accelerate datasets (alice asked to accelerate "
                                           "fashion-mnist)")
    status, err = svc(hub, "admin", "POST", "/datasets/fashion-mnist/accelerate")
    assert (status, err["error"]) == (409, f"Dataset fashion-mnist cannot be accelerated: {LOCAL_CANNOT}")
    status, dry = svc(hub, "admin", "POST", "/datasets/fashion-mnist/accelerate?dryRun=true")
    assert (status, dry) == (200, {"dryRun": True, "dataset": "fashion-mnist", "available": False,
                                   "why": LOCAL_CANNOT, "make": []})
    status, err = svc(hub, "admin", "POST", "/datasets/nothing/accelerate")
    assert (status, err["error"]) == (404, "there is no dataset nothing")
    status, undone = svc(hub, "admin", "DELETE", "/datasets/fashion-mnist/accelerate")
    assert status == 200 and undone["acceleration"]["enabled"] is False  # never chosen: nothing to undo
    assert svc(hub, "admin", "PUT", "/datasets/fashion-mnist/accelerate", {})[0] == 405
    audit = svc(hub, "admin", "GET", "/datasets")[1]["audit"]
    assert not any("accelerated" in a["message"] for a in audit)
