"""Datasets (issue 20): the object's parsing and every error, and its semantics in a scenario.

Three tables. ``BAD`` holds one edit of a valid Dataset per row and the exact one-line
error it must give; ``BAD_SETS`` the errors only a set of datasets shows (names twice,
mount paths that clash). ``SEMANTICS`` runs small scenarios through the simulator: each
row is the datasets, the quota, the workload, and what the last step must show (the
pod's phase and reason, the dataset's state per namespace). Then the command line:
``--json``'s ``datasets`` key and bad input as one line and exit status 1. To add a
case, add a row.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from hub_ext.quota import ValidationError, parse_object
from hub_ext.quota.dataset import Dataset, check_datasets
from hub_ext.sim.scenario import parse_scenario
from hub_ext.sim.simulator import Simulator

REPO = Path(__file__).resolve().parents[1]
GI = 1024**3 * 1000  # one Gi of storage in milli-units


def dataset(name="fashion-mnist", **spec) -> dict:
    body = {"namespaces": ["team-a"], "source": {"path": "/srv/data/fashion"}}
    body.update(spec)
    return {"apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": name}, "spec": body}


def edit(change) -> dict:
    obj = dataset()
    change(obj)
    return obj


def set_spec(**values):
    return lambda obj: obj["spec"].update(values)


def drop_spec(key):
    return lambda obj: obj["spec"].pop(key)


PV = {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany"], "hostPath": {"path": "/srv/fashion"}}

# -- the object -------------------------------------------------------------------------------

def test_defaults():
    ds = parse_object(dataset())
    assert isinstance(ds, Dataset)
    assert (ds.name, ds.source_kind, ds.source, ds.read_only, ds.mount_path, ds.size, ds.description) == (
        "fashion-mnist", "path", "/srv/data/fashion", True, "/datasets/fashion-mnist", None, "")
    assert (ds.teams, ds.namespaces) == ((), ("team-a",))


def test_every_field():
    ds = parse_object(dataset(description="Fashion-MNIST", teams=["team-a", "team-b"], namespaces=["ns-a"],
                              source={"persistentVolume": PV}, readOnly=False, mountPath="/data/fashion/",
                              size="5Gi"))
    assert (ds.source_kind, ds.source, ds.read_only, ds.mount_path, ds.size) == (
        "persistentVolume", PV, False, "/data/fashion", 5 * GI)
    assert ds.teams == ("team-a", "team-b") and ds.description == "Fashion-MNIST"
    assert ds.makes_claims


@pytest.mark.parametrize("teams,namespace,allowed", [
    pytest.param(["team-a"], "team-a", False, id="a-team-is-not-a-namespace"),
    pytest.param("*", "anything", True, id="star-is-every-namespace"),
    pytest.param(["*"], "anything", True, id="star-in-a-list"),
])
def test_who_may_use_it(teams, namespace, allowed):
    assert parse_object(dataset(teams=teams, namespaces=[])).allows(namespace) is allowed


def test_size_defaults_to_the_volumes_capacity():
    ds = parse_object(dataset(source={"persistentVolume": PV}))
    assert ds.size == 10 * GI


def test_a_claim_source():
    ds = parse_object(dataset(source={"claim": "fashion-demo-pvc"}))
    assert (ds.source_kind, ds.source, ds.makes_claims) == ("claim", "fashion-demo-pvc", False)


W = "Dataset fashion-mnist: "
BAD = [
    pytest.param(edit(lambda o: o.update(apiVersion="v1")),
                 "Dataset: apiVersion must be tenancy.jupyter.org/v1alpha1, got 'v1'", id="api-version"),
    pytest.param(edit(lambda o: o["metadata"].pop("name")),
                 "Dataset metadata.name: expected a non-empty string, got None", id="name-missing"),
    pytest.param(edit(lambda o: o["metadata"].update(name="Fashion_MNIST")),
                 "Dataset metadata.name: 'Fashion_MNIST' is not a valid dataset name (DNS-1123 label: lowercase "
                 "letters, digits and '-', at most 63)", id="name-not-dns"),
    pytest.param(edit(lambda o: o["metadata"].update(name="fashion.mnist")),
                 "Dataset metadata.name: 'fashion.mnist' is not a valid dataset name (DNS-1123 label: lowercase "
                 "letters, digits and '-', at most 63)", id="name-with-a-dot"),
    pytest.param(edit(lambda o: o["metadata"].update(name="x" * 64)),
                 f"Dataset metadata.name: '{'x' * 56}... is not a valid dataset name (DNS-1123 label: lowercase "
                 "letters, digits and '-', at most 63)", id="name-too-long"),
    pytest.param(edit(lambda o: o.pop("spec")), W + "spec: expected a mapping, got nothing", id="spec-missing"),
    pytest.param(edit(set_spec(volume="x")),
                 W + "spec: unknown field 'volume' (known: description, mountPath, namespaces, readOnly, size, "
                 "source, teams)", id="unknown-field"),
    pytest.param(edit(set_spec(namespaces=[])),
                 W + "spec names no teams and no namespaces: say who may use it (teams: [GROUP, ...] or \"*\", "
                 "namespaces: [NAMESPACE, ...])", id="nobody"),
    pytest.param(edit(set_spec(namespaces=["Team_A"])),
                 W + "spec.namespaces: 'Team_A' is not a valid namespace name (lowercase letters, digits and '-', "
                 "at most 63)", id="bad-namespace"),
    pytest.param(edit(set_spec(teams=[""])), W + "spec.teams: expected a non-empty string, got ''", id="bad-team"),
    pytest.param(edit(set_spec(teams="everyone")), W + "spec.teams: expected a list, got a string",
                 id="teams-a-string"),
    pytest.param(edit(set_spec(source={"path": "/srv/a", "claim": "c"})),
                 W + "spec.source: give exactly one of persistentVolume, claim, path (got claim and path)",
                 id="two-sources"),
    pytest.param(edit(set_spec(source={})),
                 W + "spec.source: give exactly one of persistentVolume, claim, path (got none)", id="no-source"),
    pytest.param(edit(drop_spec("source")),
                 W + "spec.source: give exactly one of persistentVolume, claim, path (got none)",
                 id="source-missing"),
    pytest.param(edit(set_spec(source={"bucket": "s3://x"})),
                 W + "spec.source: unknown field 'bucket' (known: claim, path, persistentVolume)", id="unknown-source"),
    pytest.param(edit(set_spec(source={"path": "srv/data"})),
                 W + "spec.source.path: 'srv/data' is not an absolute path (start it with /)", id="relative-path"),
    pytest.param(edit(set_spec(source={"path": "/srv/../etc"})),
                 W + "spec.source.path: '/srv/../etc' goes up with '..'; name the folder itself", id="path-goes-up"),
    pytest.param(edit(set_spec(source={"claim": "Bad_Claim"})),
                 W + "spec.source.claim: 'Bad_Claim' is not a valid name (DNS-1123: lowercase letters, digits, "
                 "'-' and '.', at most 253)", id="bad-claim-name"),
    pytest.param(edit(set_spec(source={"persistentVolume": "hostPath"})),
                 W + "spec.source.persistentVolume: expected a mapping, got a string", id="pv-not-a-mapping"),
    pytest.param(edit(set_spec(source={"persistentVolume": {"hostPath": {"path": "/srv"}}})),
                 W + "spec.size is needed for a persistentVolume source (what each namespace's claim asks for), "
                 "or give the volume's capacity.storage", id="pv-without-size"),
    pytest.param(edit(set_spec(source={"persistentVolume": PV}, size="20Gi")),
                 W + "spec.size 20Gi is more than the volume's capacity.storage 10Gi", id="size-above-capacity"),
    pytest.param(edit(set_spec(size="ten")),
                 W + "spec.size: 'ten' is not a quantity (expected e.g. 500m, 2, 10Gi)", id="bad-size"),
    pytest.param(edit(set_spec(size="-1Gi")), W + "spec.size: '-1Gi' must not be negative", id="negative-size"),
    pytest.param(edit(set_spec(size=0)), W + "spec.size must be more than 0", id="zero-size"),
    pytest.param(edit(set_spec(mountPath="datasets/x")),
                 W + "spec.mountPath: 'datasets/x' is not an absolute path (start it with /)",
                 id="relative-mount-path"),
    pytest.param(edit(set_spec(mountPath="/datasets/../home/alice")),
                 W + "spec.mountPath: '/datasets/../home/alice' goes up with '..'; name the folder itself",
                 id="mount-path-goes-up"),
    pytest.param(edit(set_spec(mountPath="/home/jovyan/data")),
                 W + "spec.mountPath /home/jovyan/data would cover the home (/home); mount it elsewhere, e.g. "
                 "/datasets/fashion-mnist", id="mount-path-in-the-home"),
    pytest.param(edit(set_spec(mountPath="/home")),
                 W + "spec.mountPath /home would cover the home (/home); mount it elsewhere, e.g. "
                 "/datasets/fashion-mnist", id="mount-path-is-the-home"),
    pytest.param(edit(set_spec(mountPath="/")),
                 W + "spec.mountPath / would cover the home (/home); mount it elsewhere, e.g. /datasets/fashion-mnist",
                 id="mount-path-root"),
    pytest.param(edit(set_spec(readOnly="yes")), W + "spec.readOnly: expected true or false, got 'yes'",
                 id="read-only-not-a-bool"),
    pytest.param(edit(set_spec(description=["a"])), W + "spec.description: expected a string, got ['a']",
                 id="description-not-a-string"),
]


@pytest.mark.parametrize("obj,message", BAD)
def test_bad_dataset_is_one_line_naming_the_culprit(obj, message):
    with pytest.raises(ValidationError) as err:
        parse_object(obj)
    assert str(err.value) == message


BAD_SETS = [
    pytest.param([dataset(), dataset()], "Dataset fashion-mnist: declared twice", id="name-twice"),
    pytest.param([dataset("a", mountPath="/data/x"), dataset("b", mountPath="/data/x/")],
                 "Dataset b: mountPath /data/x is also Dataset a's", id="same-mount-path"),
    pytest.param([dataset("a", mountPath="/data"), dataset("b", mountPath="/data/b")],
                 "Dataset b: mountPath /data/b (Dataset b) is inside /data (Dataset a)", id="mount-path-inside"),
    pytest.param([dataset("a", mountPath="/data/a/deep"), dataset("b", mountPath="/data/a")],
                 "Dataset b: mountPath /data/a/deep (Dataset a) is inside /data/a (Dataset b)", id="mount-path-around"),
]


@pytest.mark.parametrize("objs,message", BAD_SETS)
def test_datasets_declared_together_clash(objs, message):
    with pytest.raises(ValidationError) as err:
        check_datasets([parse_object(o) for o in objs])
    assert str(err.value) == message


def test_neighbouring_mount_paths_do_not_clash():
    check_datasets([parse_object(dataset("a", mountPath="/data/a")), parse_object(dataset("b", mountPath="/data/ab"))])


# -- in a scenario ----------------------------------------------------------------------------

def job(namespace="team-a", datasets="fashion-mnist", name="train", cpu="1", where="metadata", pods=1) -> dict:
    annotations = {"tenancy.jupyter.org/datasets": datasets} if datasets is not None else {}
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"parallelism": pods, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}}
    if where == "metadata":
        body["metadata"]["annotations"] = annotations
    else:
        body["spec"]["template"]["metadata"] = {"annotations": annotations}
    return body


def quota(namespace="team-a", **hard) -> dict:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "rq", "namespace": namespace},
            "spec": {"hard": {k.replace("_", "."): v for k, v in hard.items()}}}


def pv_dataset(name="fashion-mnist", size="10Gi", **spec) -> dict:
    return dataset(name, source={"persistentVolume": {**PV, "capacity": {"storage": "50Gi"}}}, size=size, **spec)


def simulate(objects, steps) -> list[dict]:
    doc = {"nodes": [{"name": "n1", "allocatable": {"cpu": "8"}}], "objects": objects, "steps": steps}
    return list(Simulator(parse_scenario(copy.deepcopy(doc))).run())


@dataclass
class Case:
    objects: list
    steps: list  # the last step's report is checked
    phases: list  # [(pod name, phase, reason)] of the last step, in report order
    datasets: dict = field(default_factory=dict)


def apply(*objs):
    return {"apply": list(objs)}


SEMANTICS = [
    pytest.param(Case([dataset()], [apply(job())], [("train-0", "Running", None)],
                      {"fashion-mnist": {"team-a": "Bound"}}), id="allowed-folder-bound-runs"),
    pytest.param(Case([dataset()], [apply(job(where="template"))], [("train-0", "Running", None)],
                      {"fashion-mnist": {"team-a": "Bound"}}), id="annotation-on-the-pod-template"),
    pytest.param(Case([pv_dataset()], [apply(job())], [("train-0", "Running", None)],
                      {"fashion-mnist": {"team-a": "Bound"}}), id="pv-claim-without-quota-bound"),
    pytest.param(Case([dataset()], [apply(job(namespace="team-c"))],
                      [("train-0", "Rejected", "dataset-not-allowed")], {"fashion-mnist": {"team-a": "Bound"}}),
                 id="other-namespace-rejected"),
    pytest.param(Case([dataset()], [apply(job(datasets="imagenet"))],
                      [("train-0", "Rejected", "dataset-not-allowed")], {"fashion-mnist": {"team-a": "Bound"}}),
                 id="unknown-dataset-rejected"),
    pytest.param(Case([dataset(namespaces=[], teams=["team-a"])], [apply(job())],
                      [("train-0", "Rejected", "dataset-not-allowed")], {"fashion-mnist": {}}),
                 id="teams-only-allows-no-scenario-namespace"),
    pytest.param(Case([dataset(namespaces=[], teams="*")], [apply(job(namespace="team-z"))],
                      [("train-0", "Running", None)], {"fashion-mnist": {"team-z": "Bound"}}),
                 id="star-allows-every-namespace"),
    pytest.param(Case([pv_dataset(), quota(persistentvolumeclaims="0")], [apply(job())],
                      [("train-0", "Pending", "dataset-not-ready")], {"fashion-mnist": {"team-a": "Refused"}}),
                 id="no-claim-allowed-refused-waits"),
    pytest.param(Case([pv_dataset(), quota(requests_storage="5Gi")], [apply(job())],
                      [("train-0", "Pending", "dataset-not-ready")], {"fashion-mnist": {"team-a": "Refused"}}),
                 id="storage-below-size-refused"),
    pytest.param(Case([pv_dataset("a"), pv_dataset("b", mountPath="/datasets/b"), quota(persistentvolumeclaims="1")],
                      [apply(job(datasets="b"))], [("train-0", "Pending", "dataset-not-ready")],
                      {"a": {"team-a": "Bound"}, "b": {"team-a": "Refused"}}),
                 id="the-other-datasets-claims-count"),
    pytest.param(Case([pv_dataset("a"), pv_dataset("b"), quota(requests_storage="15Gi")],
                      [apply(job(datasets="a"))], [("train-0", "Running", None)],
                      {"a": {"team-a": "Bound"}, "b": {"team-a": "Refused"}}),
                 id="other-datasets-storage-counts-but-a-is-bound"),
    pytest.param(Case([dataset(source={"claim": "fashion-demo-pvc"}), quota(persistentvolumeclaims="0")],
                      [apply(job())], [("train-0", "Running", None)], {"fashion-mnist": {"team-a": "Bound"}}),
                 id="existing-claim-needs-no-quota"),
    pytest.param(Case([pv_dataset(), quota(persistentvolumeclaims="0")],
                      [apply(job()), apply(quota(persistentvolumeclaims="1"))], [("train-0", "Running", None)],
                      {"fashion-mnist": {"team-a": "Bound"}}), id="quota-raised-then-bound-and-starts"),
    pytest.param(Case([pv_dataset(), quota(persistentvolumeclaims="0")],
                      [apply(job()), {"delete": [{"kind": "ResourceQuota", "namespace": "team-a", "name": "rq"}]}],
                      [("train-0", "Running", None)], {"fashion-mnist": {"team-a": "Bound"}}),
                 id="quota-deleted-then-bound"),
    pytest.param(Case([pv_dataset(), quota(persistentvolumeclaims="1")],
                      [apply(job()), apply(quota(persistentvolumeclaims="0")), apply(job(name="more"))],
                      [("more-0", "Running", None), ("train-0", "Running", None)],
                      {"fashion-mnist": {"team-a": "Bound"}}), id="a-bound-claim-stays-bound"),
    pytest.param(Case([], [apply(job()), apply(dataset())], [("train-0", "Running", None)],
                      {"fashion-mnist": {"team-a": "Bound"}}), id="dataset-applied-later-job-controller-retries"),
    pytest.param(Case([dataset(namespaces=["team-b"])], [apply(job()), apply(dataset())],
                      [("train-0", "Running", None)], {"fashion-mnist": {"team-a": "Bound"}}),
                 id="dataset-changed-to-allow"),
    pytest.param(Case([dataset()], [apply(job(pods=2, datasets="fashion-mnist")),
                                    {"delete": [{"kind": "Dataset", "name": "fashion-mnist"}]}],
                      [("train-0", "Running", None), ("train-1", "Running", None)], {}),
                 id="deleted-dataset-running-pods-keep-running"),
    pytest.param(Case([dataset()], [apply(job(datasets=None))], [("train-0", "Running", None)],
                      {"fashion-mnist": {"team-a": "Bound"}}), id="work-naming-nothing-is-untouched"),
]


@pytest.mark.parametrize("case", SEMANTICS)
def test_dataset_semantics(case):
    last = simulate(case.objects, case.steps)[-1]
    assert [(p["name"], p["phase"], p["reason"]) for p in last["pods"]] == case.phases
    assert last["datasets"] == case.datasets


def test_waiting_work_holds_nothing_and_says_the_quotas_words():
    (report,) = simulate([pv_dataset(), quota(persistentvolumeclaims="0", requests_cpu="4")],
                         [apply(job(cpu="2", pods=2))])
    waiting = report["pods"]
    assert [p["name"] for p in waiting] == ["train-0", "train-1"]
    assert all("position" not in p for p in waiting)  # outside the queue
    assert waiting[0]["message"] == (
        'waiting for dataset fashion-mnist: its claim in team-a is refused: persistentvolumeclaims "fashion-mnist" '
        "is forbidden: exceeded quota: rq, requested: persistentvolumeclaims=1, used: persistentvolumeclaims=0, "
        "limited: persistentvolumeclaims=0")
    assert waiting[0]["details"] == {"dataset": "fashion-mnist", "namespace": "team-a", "state": "Refused"}
    # Not counted: a job without datasets takes the whole requests.cpu quota.
    (after,) = simulate([pv_dataset(), quota(persistentvolumeclaims="0", requests_cpu="4")],
                        [apply(job(cpu="2", pods=2), job(name="free", cpu="4", datasets=None))])
    assert [(p["name"], p["phase"]) for p in after["pods"]] == [
        ("free-0", "Running"), ("train-0", "Pending"), ("train-1", "Pending")]


def test_refused_message_names_the_dataset_and_namespace():
    (report,) = simulate([dataset()], [apply(job(namespace="team-c"))])
    (pod,) = report["pods"]
    assert pod["message"] == ('pods "train-0" is forbidden: dataset fashion-mnist is not for namespace team-c '
                              "(its namespaces: team-a)")
    (report,) = simulate([dataset(namespaces=[], teams=["team-a", "team-b"])], [apply(job())])
    assert report["pods"][0]["message"] == ('pods "train-0" is forbidden: dataset fashion-mnist is not for namespace '
                                            "team-a (it names only teams, hub groups: team-a, team-b)")


def test_a_refused_bare_pod_is_shown_once():
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "team-c", "annotations": {"tenancy.jupyter.org/datasets": "x"}},
           "spec": {"containers": [{"name": "c"}]}}
    reports = simulate([dataset()], [apply(pod), {"advance": "1s"}, apply(pod)])
    assert [[(p["name"], p["phase"]) for p in r["pods"]] for r in reports] == [
        [("p", "Rejected")], [], [("p", "Rejected")]]


def test_gang_waits_whole_for_its_dataset():
    gang = job(pods=2)
    gang["metadata"]["annotations"]["tenancy.jupyter.org/gang"] = "true"
    reports = simulate([pv_dataset(), quota(persistentvolumeclaims="0")],
                       [apply(gang), apply(quota(persistentvolumeclaims="1"))])
    assert [(p["name"], p["phase"]) for p in reports[0]["pods"]] == [("train-0", "Pending"), ("train-1", "Pending")]
    assert [(p["name"], p["phase"], p["gang"]["size"]) for p in reports[1]["pods"]] == [
        ("train-0", "Running", 2), ("train-1", "Running", 2)]


def test_every_report_has_the_datasets_key():
    (report,) = simulate([], [apply(job(datasets=None))])
    assert report["datasets"] == {}


@pytest.mark.parametrize("objects,steps,message", [
    pytest.param([dataset(), dataset()], [], "objects: Dataset fashion-mnist: declared twice", id="twice-in-objects"),
    pytest.param([dataset("a", mountPath="/d/x")], [apply(dataset("b", mountPath="/d/x"))],
                 "steps[0]: Dataset b: mountPath /d/x is also Dataset a's", id="clash-with-an-applied-one"),
    pytest.param([], [{"delete": [{"kind": "Dataset", "name": "nope"}]}], "steps[0]: Dataset nope not found",
                 id="delete-unknown"),
    pytest.param([], [apply(job(datasets="a, Bad"))],
                 "steps[0].apply[0]: Job team-a/train: annotation tenancy.jupyter.org/datasets: 'Bad' is not a valid "
                 "dataset name (DNS-1123 label: lowercase letters, digits and '-', at most 63)", id="bad-annotation"),
])
def test_bad_scenario(objects, steps, message):
    with pytest.raises(ValidationError) as err:
        simulate(objects, steps)
    assert str(err.value) == message


def test_annotation_lists_names_once_in_order():
    spec = parse_object(job(datasets=" b, a,,b "))
    assert spec.datasets == ("b", "a")


# -- through the command line ----------------------------------------------------------------

def tenancy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hub_ext.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def write(tmp_path, doc) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else textwrap.dedent(doc))
    return str(path)


def test_json_lines_carry_datasets(tmp_path):
    path = write(tmp_path, {"nodes": [{"name": "n1", "allocatable": {"cpu": "8"}}],
                            "objects": [pv_dataset(namespaces=["team-a", "team-d"]),
                                        quota("team-d", persistentvolumeclaims="0")],
                            "steps": [apply(job(), job("team-d"))]})
    proc = tenancy("simulate", path, "--json")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    (line,) = [json.loads(text) for text in proc.stdout.splitlines()]
    assert line["datasets"] == {"fashion-mnist": {"team-a": "Bound", "team-d": "Refused"}}
    assert {"step", "name", "action", "time", "pods", "quota", "evictions", "warnings"} <= set(line)
    table = tenancy("simulate", path)
    assert "  datasets: fashion-mnist (team-a Bound, team-d Refused)\n" in table.stdout


def test_json_lines_without_datasets_have_an_empty_key(tmp_path):
    path = write(tmp_path, {"nodes": [{"name": "n1", "allocatable": {"cpu": "8"}}],
                            "steps": [apply(job(datasets=None))]})
    proc = tenancy("simulate", path, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["datasets"] == {}
    assert "datasets:" not in tenancy("simulate", path).stdout


def test_validate_takes_dataset_manifests(tmp_path):
    path = write(tmp_path, yaml.safe_dump_all([dataset("a"), dataset("b")]))
    proc = tenancy("validate", path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"{path}: ok: 2 Dataset\n", "")


@pytest.mark.parametrize("command", ["validate", "simulate"])
@pytest.mark.parametrize("docs,message", [
    pytest.param([dataset(source={"path": "/srv", "claim": "c"})],
                 "document 1: Dataset fashion-mnist: spec.source: give exactly one of persistentVolume, claim, path "
                 "(got claim and path)", id="two-sources"),
    pytest.param([dataset("a", mountPath="/d"), dataset("b", mountPath="/d")],
                 "Dataset b: mountPath /d is also Dataset a's", id="clash"),
])
def test_bad_datasets_are_one_line_exit_1(tmp_path, command, docs, message):
    if command == "validate":
        path = write(tmp_path, yaml.safe_dump_all(docs))
        expected = f"tenancy: error: {path}: {message}\n"
    else:
        path = write(tmp_path, {"objects": docs})
        where = "objects[0]: " if "document 1" in message else "objects: "
        expected = f"tenancy: error: {path}: {where}{message.removeprefix('document 1: ')}\n"
    proc = tenancy(command, path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", expected)

