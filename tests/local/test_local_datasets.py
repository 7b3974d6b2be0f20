"""The local backend's datasets, on real accounts and the kernel's own permission checks (as root).

Two teams, one account each: the dataset is team-a's. ``datasets_changed`` guards its folder
(root's, the dataset's group, 0750 read-only / 2770 writable); team-a's account reads a file
by its full path and through the link in its work folder, team-d's gets "Permission denied"
by either; nobody writes to a read-only one; a dataset no longer wanted leaves its group empty.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from builders import node, tree
from hub_ext.backends.local import LocalBackend
from hub_ext.backends.local.accounts import LocalAccounts, groups_of
from hub_ext.backends.local.datasets import group_name, link_datasets
from hub_ext.backends.local.workdir import make_workdir
from hub_ext.quota.dataset import parse_dataset
from hub_ext.service.controller import Controller
from hub_ext.service.store import Store, WorkloadRow
from hub_ext.tenants import tenants_from_groups
from nobody import run_as_nobody

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="accounts and groups need root (CI runs the tests as root)")

TREE = tree(node("root", {"cpu": 8}, {"cpu": 8}, children=[
    node("a", {"cpu": 4}, {"cpu": 8}, ["team-a"]), node("d", {"cpu": 4}, {"cpu": 8}, ["team-d"])]))
USERS = {"team-a": "dsreader", "team-d": "dsstranger"}
DATASET = "local-fashion"


@pytest.fixture(scope="module")
def accounts():
    made = {team: LocalAccounts().ensure(user) for team, user in USERS.items()}
    yield made
    for entry in made.values():
        subprocess.run(["userdel", "--remove", entry.pw_name], capture_output=True)
    subprocess.run(["groupdel", group_name(DATASET)], capture_output=True)


@pytest.fixture
def top():
    """Where the folders live: a place every account may cross (as /srv would be)."""
    path = Path(tempfile.mkdtemp(prefix="tenancy-local-ds-", dir="/tmp"))
    os.chmod(path, 0o711)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def controller(tmp_path, top) -> Controller:
    backend = LocalBackend(nodes_config=[{"name": "n1", "allocatable": {"cpu": "8", "memory": "8Gi"}}],
                           data_dir=str(top / "data"))
    c = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), tree=TREE, backend=backend)
    c.set_tenants(tenants_from_groups([{"name": team, "users": [user], "properties": {"tenancy.namespace": team}}
                                       for team, user in USERS.items()], TREE))
    return c


def declare(c, folder: Path, read_only: bool = True) -> None:
    c.datasets.configure([parse_dataset({
        "apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": DATASET},
        "spec": {"teams": ["team-a"], "source": {"path": str(folder)}, "readOnly": read_only}})])
    c.datasets.start()


def as_account(entry: pwd.struct_passwd, code: str, *args: str) -> str:
    """Run ``code`` (Python) as the account, with its own groups only, as the backend runs a job; its output."""
    done = subprocess.run(["/usr/bin/python3", "-c", code, *args], capture_output=True, text=True, timeout=60,
                          user=entry.pw_uid, group=entry.pw_gid, extra_groups=groups_of(entry), cwd="/")
    return (done.stdout + done.stderr).strip()


READ = """import sys
try:
    print("read " + open(sys.argv[1]).read())
except OSError as err:
    print("denied: " + err.strerror)
"""
WRITE = """import sys
try:
    open(sys.argv[1], "w").write("x"); print("wrote")
except OSError as err:
    print("denied: " + err.strerror)
"""


def test_only_the_allowed_teams_account_reads_the_folder_even_by_full_path(tmp_path, top, accounts):
    folder = top / "fashion"
    folder.mkdir(mode=0o755)
    (folder / "labels.json").write_text("[0, 1, 2]")
    c = controller(tmp_path, top)
    declare(c, folder)
    assert c.datasets.state(DATASET, "team-a") == ("Bound", None)
    group = grp.getgrnam(group_name(DATASET))
    assert group.gr_mem == [accounts["team-a"].pw_name]
    st = os.stat(folder)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, group.gr_gid, 0o750)
    reader, stranger = accounts["team-a"], accounts["team-d"]
    assert as_account(reader, READ, str(folder / "labels.json")) == "read [0, 1, 2]"
    assert as_account(stranger, READ, str(folder / "labels.json")) == "denied: Permission denied"
    assert as_account(reader, WRITE, str(folder / "mine.txt")) == "denied: Permission denied"  # read-only
    # the reader's job finds it at datasets/<name> in its work folder; the stranger cannot follow that link
    work = make_workdir(top / "data", "w1", reader.pw_uid, reader.pw_gid)
    paths = link_datasets(work, c.datasets.uses(_row(c, "team-a")), reader.pw_uid, reader.pw_gid)
    assert paths == {DATASET: str(work / "datasets" / DATASET)}
    assert as_account(reader, READ, paths[DATASET] + "/labels.json") == "read [0, 1, 2]"
    assert as_account(stranger, READ, paths[DATASET] + "/labels.json") == "denied: Permission denied"
    # no longer wanted anywhere (team-a is gone): its group loses everyone, and the folder stays closed
    c.set_tenants([t for t in c.tenants if t.group != "team-a"])
    assert grp.getgrnam(group_name(DATASET)).gr_mem == []
    assert as_account(reader, READ, str(folder / "labels.json")) == "denied: Permission denied"


def test_a_writable_dataset_lets_its_team_write_and_keeps_new_files_in_its_group(tmp_path, top, accounts):
    folder = top / "scratch"
    folder.mkdir()
    c = controller(tmp_path, top)
    declare(c, folder, read_only=False)
    st = os.stat(folder)
    assert stat.S_IMODE(st.st_mode) == 0o2770
    assert as_account(accounts["team-a"], WRITE, str(folder / "out.txt")) == "wrote"
    assert os.stat(folder / "out.txt").st_gid == st.st_gid
    assert as_account(accounts["team-d"], WRITE, str(folder / "theirs.txt")) == "denied: Permission denied"


def _row(c, namespace) -> WorkloadRow:
    return WorkloadRow(id="w1", kind="training", name="job", user="dsreader", namespace=namespace, spec={},
                       state="Running", created=0.0, succeeded=0)


NOT_ROOT = r"""
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from builders import node, tree
from hub_ext.backends.local import LocalBackend
from hub_ext.backends.local.datasets import link_datasets
from hub_ext.backends.local.workdir import make_workdir
from hub_ext.quota.dataset import parse_dataset
from hub_ext.service.controller import Controller
from hub_ext.service.store import Store, WorkloadRow
from hub_ext.tenants import tenants_from_groups

top = Path(sys.argv[1])
tree_ = tree(node("root", {"cpu": 8}, {"cpu": 8}, children=[node("a", {"cpu": 8}, {"cpu": 8}, ["team-a"])]))
backend = LocalBackend(nodes_config=[{"name": "n1", "allocatable": {"cpu": "8"}}], data_dir=str(top / "data"),
                       allow_shared_account=True)
c = Controller(store=Store(f"sqlite:///{top}/t.sqlite"), tree=tree_, backend=backend)
c.set_tenants(tenants_from_groups([{"name": "team-a", "users": ["a"], "properties": {"tenancy.namespace": "team-a"}}],
                                  tree_))
c.datasets.configure([parse_dataset({"apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset",
    "metadata": {"name": "shared"}, "spec": {"teams": ["team-a"], "source": {"path": str(top / "folder")}}})])
c.datasets.start()
row = WorkloadRow(id="w1", kind="training", name="j", user="a", namespace="team-a", spec={}, state="Running",
                  created=0.0, succeeded=0)
work = make_workdir(top / "data", "w1", os.getuid(), os.getgid())
links = link_datasets(work, c.datasets.uses(row), os.getuid(), os.getgid())
print(json.dumps({"state": c.datasets.state("shared", "team-a"), "links": links,
                  "read": open(Path(links["shared"]) / "f.txt").read()}))
"""


def test_a_service_that_is_not_root_links_the_folder_and_says_access_cannot_be_enforced(top):
    """A real service process as an account that is not root (``nobody``): no group, no folder given away."""
    (top / "folder").mkdir(mode=0o755)
    (top / "folder" / "f.txt").write_text("data")
    os.chmod(top / "folder" / "f.txt", 0o644)
    done = run_as_nobody(NOT_ROOT, top)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["state"] == ["Bound", f"this service does not run as root, so who may read {top / 'folder'} cannot be "
                                     "enforced: every account reads it as its modes allow"]
    assert out["links"] == {"shared": str(top / "data" / "workloads" / "w1" / "datasets" / "shared")}
    assert out["read"] == "data"
    st = os.stat(top / "folder")
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)  # left as it was
