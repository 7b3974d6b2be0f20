"""Datasets (issue 20): the object's parsing and every error.

Two tables. ``BAD`` holds one edit of a valid Dataset per row and the exact one-line
error it must give; ``BAD_SETS`` the errors only a set of datasets shows (names twice,
mount paths that clash). To add a case, add a row.
"""

from __future__ import annotations


import pytest

from hub_ext.quota import ValidationError, parse_object
from hub_ext.quota.dataset import Dataset, check_datasets

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
