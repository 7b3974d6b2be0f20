"""``tenancy datasets`` (list, ``apply FILE [--dry-run]``, ``delete NAME``) and ``tenancy submit --data``.

What needs no service runs here: the table and the dry run's lines from the service's JSON
(the API contract's shapes, issue 20), and bad input, which ends in one line and exit 1
before anything is asked. The same commands against the real service are in
tests/hub/test_datasets_people.py (the demo hub).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hub_ext.client.datasets import data_choices, provision_text, table
from hub_ext.quota.errors import ValidationError

REPO = Path(__file__).resolve().parents[1]

FASHION = {
    "name": "fashion-mnist", "description": "Fashion-MNIST, 70,000 28x28 images",
    "source": {"kind": "persistentVolume", "detail": "hostPath /srv/datasets/fashion-mnist"},
    "readOnly": True, "mountPath": "/datasets/fashion-mnist", "size": "10Gi", "accessModes": ["ReadWriteMany"],
    "teams": [], "namespaces": ["team-a", "team-b", "team-d"],
    "status": {"team-a": {"state": "Bound", "message": None}, "team-b": {"state": "Pending",
                                                                         "message": "waiting for the volume to bind"},
               "team-d": {"state": "Refused", "message": 'persistentvolumeclaims "fashion-mnist" is forbidden: '
                                                          "exceeded quota: storage, requested: persistentvolumeclaims=1, "
                                                          "used: persistentvolumeclaims=0, limited: persistentvolumeclaims=0"}},
    "inUse": {"team-a": 2, "team-b": 0, "team-d": 0}, "origin": "config", "manifest": {},
}
SCRATCH = {**FASHION, "name": "scratch", "description": "", "readOnly": False, "mountPath": "/datasets/scratch",
           "size": None, "accessModes": [], "namespaces": ["team-c"],
           "status": {"team-c": {"state": "Bound", "message": None}}, "inUse": {}}


def tenancy(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hub_ext.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env=env)


def test_the_table_has_a_row_per_dataset_and_says_why_a_namespace_is_not_ready():
    lines = table([FASHION, SCRATCH]).splitlines()
    assert lines[0].split() == ["NAME", "DESCRIPTION", "MOUNT", "PATH", "READ-ONLY", "IN", "USE", "STATE"]
    assert [c.strip() for c in lines[1].split("   ") if c.strip()] == [
        "fashion-mnist", "Fashion-MNIST, 70,000 28x28 ima…", "/datasets/fashion-mnist", "yes", "team-a 2",
        "team-a ready, team-b not ready yet, team-d refused"]
    assert lines[2] == "  team-b: not ready yet: waiting for the volume to bind"
    assert lines[3] == ('  team-d: refused: persistentvolumeclaims "fashion-mnist" is forbidden: exceeded quota: '
                        "storage, requested: persistentvolumeclaims=1, used: persistentvolumeclaims=0, limited: "
                        "persistentvolumeclaims=0")
    assert [c.strip() for c in lines[4].split("   ") if c.strip()] == ["scratch", "/datasets/scratch", "no", "none",
                                                                       "team-c ready"]
    assert len(lines) == 5
    assert table([]) == "No dataset is declared for your teams."
    # a user's view: the service leaves out the states of namespaces that are not theirs
    mine = {**FASHION, "status": {"team-b": FASHION["status"]["team-b"]}, "inUse": {"team-b": 0}}
    assert table([mine]).splitlines()[1].split()[-5:] == ["none", "team-b", "not", "ready", "yet"]


def test_a_dry_run_says_what_each_namespace_would_get():
    answer = {"dryRun": True, "dataset": FASHION, "provision": [
        {"namespace": "team-a", "action": "keep", "refused": None},
        {"namespace": "team-c", "action": "create", "refused": None},
        {"namespace": "team-d", "action": "create", "refused": "exceeded quota: storage"},
        {"namespace": "team-b", "action": "remove", "refused": None}]}
    assert provision_text(answer).splitlines() == [
        "fashion-mnist: dry run, nothing changed; this would:", "  team-a: keep", "  team-c: create",
        "  team-d: create, refused: exceeded quota: storage", "  team-b: remove"]


@pytest.mark.parametrize("given, expected", [
    (["fashion-mnist"], ["fashion-mnist"]),
    (["fashion-mnist:/data/fm", "b"], ["fashion-mnist:/data/fm", "b"]),
    ([{"name": "b", "mountPath": "/b"}], [{"name": "b", "mountPath": "/b"}]),
])
def test_data_choices_go_to_the_service_as_given(given, expected):
    assert data_choices(given) == expected


@pytest.mark.parametrize("given, words", [
    (":/data", "dataset ':/data': the dataset's name is missing"),
    ("fm:data", "dataset 'fm:data': the path 'data' must be absolute"),
    ("fm:", "dataset 'fm:': the path '' must be absolute"),
])
def test_a_data_choice_that_would_be_lost_on_the_way_is_one_line(given, words):
    with pytest.raises(ValidationError, match=words):
        data_choices([given])
    out = tenancy("submit", "--data", "fm", "--data", given, "--", "true",
                  env={"PATH": "/usr/bin:/bin", "TENANCY_API_URL": "http://127.0.0.1:1/api/v1",
                       "JUPYTERHUB_API_TOKEN": "x"})
    assert (out.returncode, out.stdout) == (1, "") and out.stderr.startswith(f"tenancy: error: {words}"), out
    assert len(out.stderr.splitlines()) == 1


DATASET = """\
    apiVersion: tenancy.jupyter.org/v1alpha1
    kind: Dataset
    metadata: {name: NAME}
    spec:
      namespaces: [team-a]
      source: {path: /srv/data/NAME}
    """


def doc(name: str, **spec_lines: str) -> str:
    text = textwrap.dedent(DATASET).replace("NAME", name)
    return text + "".join(f"  {k}: {v}\n" for k, v in spec_lines.items())


@pytest.mark.parametrize("content, words", [
    pytest.param(doc("a") + "---\n" + doc("a"), "input.yaml: Dataset a: declared twice", id="duplicate-name"),
    pytest.param(doc("a", mountPath="/data") + "---\n" + doc("b", mountPath="/data/b"),
                 "input.yaml: Dataset b: mountPath /data/b (Dataset b) is inside /data (Dataset a)", id="nested-mounts"),
    pytest.param(doc("a", mountPath="/home/x"), "input.yaml: document 1: Dataset a: spec.mountPath /home/x would "
                 "cover the home", id="over-the-home"),
    pytest.param(doc("a", mountPath="data"), "input.yaml: document 1: Dataset a: spec.mountPath: 'data' is not an "
                 "absolute path", id="relative-path"),
    pytest.param(doc("a").replace("source: {path: /srv/data/a}", "source: {path: /srv, claim: c}"),
                 "give exactly one of persistentVolume, claim, path (got claim and path)", id="two-sources"),
    pytest.param("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
                 "input.yaml: document 1: a ConfigMap, not a Dataset (kind: Dataset)", id="not-a-dataset"),
    pytest.param("nodes: []\n", "input.yaml: document 1: an object without a kind, not a Dataset", id="a-scenario"),
    pytest.param("# nothing\n", "input.yaml: no Dataset in it", id="empty"),
    pytest.param("kind: [\n", "input.yaml:2:1: invalid YAML", id="not-yaml"),
])
def test_a_bad_file_is_one_line_and_exit_1_before_the_service_is_asked(tmp_path, content, words):
    path = tmp_path / "input.yaml"
    path.write_text(content)
    # No service and no token here: the file is judged before anything is asked.
    out = tenancy("datasets", "apply", str(path), "--dry-run", env={"PATH": "/usr/bin:/bin"})
    assert (out.returncode, out.stdout) == (1, ""), out
    assert out.stderr.startswith(f"tenancy: error: {tmp_path}/{words}") or words in out.stderr, out.stderr
    assert len(out.stderr.splitlines()) == 1 and "Traceback" not in out.stderr


def test_a_missing_file_is_one_line():
    out = tenancy("datasets", "apply", "no-such-datasets.yaml", env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 1
    assert out.stderr == "tenancy: error: no-such-datasets.yaml: cannot read: No such file or directory\n"


def test_outside_a_hub_the_list_says_what_is_missing():
    out = tenancy("datasets", env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 1
    assert out.stderr == ("tenancy: error: TENANCY_API_URL is not set: run this inside a hub notebook, "
                          "or pass url=\n")
