"""Issue 20, people's side: the Datasets page of the hub's Services menu in headless Chromium (a user's
view: their teams' datasets only; an admin's: every dataset, a dry run of a new one that says what would
be provisioned or refused, apply, remove, the audit trail; the Accelerate button, off where the backend
cannot accelerate, with the backend's sentence why), and ``tenancy datasets`` / ``tenancy submit --data`` in a
terminal. Screenshots: docs/screenshots/datasets-page.png, datasets-admin.png, datasets-accelerate.png.

All against the real demo hub: its service, its pages, its users' terminals and kernels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from browser import SHOTS, browser, logged_in, shot  # noqa: F401 - the fixture
from demo_hub import API, ROOT, svc, token
from kernel import run_code
from waiting import wait_for

PAGES = "/services/tenancy/"

NEW = """\
apiVersion: tenancy.jupyter.org/v1alpha1
kind: Dataset
metadata: {name: cifar-10}
spec:
  description: CIFAR-10, 60,000 32x32 images
  teams: [team-c, team-d]
  source: {path: /srv/datasets/cifar-10}
"""

# the local backend's sentence (hub_ext/backends/local/backend.py), which the page shows beside the button
LOCAL_CANNOT = "the local backend reads datasets from folders; acceleration needs Fluid on Kubernetes"


def ready(page, errors):
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.wait_for_function("window.tenancyPageReady === true")
    page.wait_for_selector("#datasets section.dataset, #no-datasets, #datasets .notice")


# -- the demo hub ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hub(datasets_hub):
    return datasets_hub  # one hub for the datasets modules (conftest.py)


def open_page(page, hub, path):
    errors = []
    page.goto(hub.url(PAGES + path))
    ready(page, errors)
    wait_for(lambda: page.inner_text("#live") == "live", "the page's event stream", timeout=20)
    return errors


def tenancy(hub, user, *args, stdin=None):
    env = {**os.environ, "TENANCY_API_URL": hub.url(API), "JUPYTERHUB_API_TOKEN": token(hub, user)}
    return subprocess.run([sys.executable, "-m", "hub_ext.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=ROOT, input=stdin)


def bound(hub, name, namespace):
    """Whether the service says ``name`` is Bound in ``namespace`` (the backend provisions it after the start)."""
    status, body = svc(hub, "admin", "GET", f"/datasets/{name}")
    return status == 200 and body["status"].get(namespace, {}).get("state") == "Bound" and body


def test_demo_a_user_sees_their_teams_datasets_and_an_admin_dry_runs_applies_and_removes(hub, browser):
    wait_for(lambda: bound(hub, "fashion-mnist", "team-a"), "fashion-mnist to be ready in team-a",
             show=lambda: svc(hub, "admin", "GET", "/datasets/fashion-mnist"))
    page = logged_in(browser, hub, "alice")
    errors = open_page(page, hub, "datasets")
    assert page.locator("section.dataset h2").all_inner_texts() == ["fashion-mnist read-only"]
    assert page.locator("section[data-dataset=fashion-mnist] tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.namespace, r.dataset.state])") == [["team-a", "Bound"]]
    assert page.locator("button[data-action=accelerate]").count() == 0  # a user's page: no button
    assert page.locator("section[data-dataset=fashion-mnist] td.cache").count() == 0  # not accelerated
    shot(page, "datasets-page")
    assert not errors, errors
    page.context.close()
    page = logged_in(browser, hub, "dave")
    open_page(page, hub, "datasets")
    assert page.locator("section.dataset").count() == 0 and page.locator("#no-datasets").count() == 1
    page.context.close()
    page = logged_in(browser, hub, "admin", height=1000)
    errors = open_page(page, hub, "datasets")
    # the local backend cannot accelerate: the button is off, and beside it the backend's sentence why
    assert svc(hub, "admin", "GET", "/datasets/fashion-mnist")[1]["acceleration"] == {
        "available": False, "why": LOCAL_CANNOT, "enabled": False, "state": {}}
    section = page.locator("section[data-dataset=fashion-mnist]")
    button = section.locator("button[data-action=accelerate]")
    assert button.inner_text() == "Accelerate" and button.is_disabled()
    why = section.locator("[data-why=accelerate]")
    assert why.inner_text() == f"It cannot be accelerated here: {LOCAL_CANNOT}."
    assert button.get_attribute("aria-describedby") == why.get_attribute("id")
    assert section.locator("button[data-action=stop-accelerating], td.cache").count() == 0
    SHOTS.mkdir(parents=True, exist_ok=True)
    section.screenshot(path=str(SHOTS / "datasets-accelerate.png"))
    page.fill("#manifest", NEW)
    page.click("#dry-run")
    page.wait_for_selector("#provision li")
    assert page.locator("#provision li").evaluate_all("li => li.map(x => [x.dataset.namespace, x.dataset.action])") \
        == [["team-c", "create"], ["team-d", "create"]]
    assert svc(hub, "admin", "GET", "/datasets/cifar-10")[0] == 404  # a dry run changes nothing
    shot(page, "datasets-admin")
    page.click("#apply")
    page.wait_for_selector("#applied")
    page.wait_for_selector("section[data-dataset=cifar-10]")
    assert svc(hub, "admin", "GET", "/datasets/cifar-10")[1]["origin"] == "api"
    page.wait_for_selector("#audit tbody tr >> text=cifar-10")
    assert "admin" in page.inner_text("#audit tbody tr:first-child")
    page.click("section[data-dataset=cifar-10] button[data-action=remove]")
    page.click("section[data-dataset=cifar-10] button[data-action=confirm-remove]")
    page.wait_for_selector("#removed")
    assert svc(hub, "admin", "GET", "/datasets/cifar-10")[0] == 404
    assert not errors, errors
    page.context.close()


def test_demo_datasets_in_a_terminal(hub, tmp_path):
    wait_for(lambda: bound(hub, "fashion-mnist", "team-a"), "fashion-mnist to be ready in team-a")
    listed = tenancy(hub, "alice", "datasets")
    assert listed.returncode == 0, listed
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:2] == ["NAME", "DESCRIPTION"] and lines[1].startswith("fashion-mnist ")
    assert "team-a ready" in lines[1] and "team-b" not in lines[1]  # alice's namespace only
    as_json = [json.loads(line) for line in tenancy(hub, "alice", "datasets", "--json").stdout.splitlines()]
    assert [d["name"] for d in as_json] == ["fashion-mnist"] and as_json[0]["mountPath"] == "/datasets/fashion-mnist"
    path = tmp_path / "cifar.yaml"
    path.write_text(NEW)
    refused = tenancy(hub, "alice", "datasets", "apply", str(path))
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused
    assert refused.stderr.startswith("tenancy: error: ") and "(HTTP 403)" in refused.stderr
    dry = tenancy(hub, "admin", "datasets", "apply", str(path), "--dry-run")
    assert dry.returncode == 0, dry
    assert dry.stdout.splitlines() == ["cifar-10: dry run, nothing changed; this would:", "  team-c: create",
                                       "  team-d: create"]
    assert svc(hub, "admin", "GET", "/datasets/cifar-10")[0] == 404
    applied = tenancy(hub, "admin", "datasets", "apply", str(path))
    assert applied.returncode == 0 and applied.stdout.startswith("cifar-10: applied; team-c "), applied
    config = tenancy(hub, "admin", "datasets", "delete", "fashion-mnist")  # declared in the configuration
    assert config.returncode == 1 and "(HTTP 409)" in config.stderr and len(config.stderr.splitlines()) == 1, config
    gone = tenancy(hub, "admin", "datasets", "delete", "cifar-10")
    assert (gone.returncode, gone.stdout) == (0, "cifar-10: deleted\n"), gone
    # a job names the dataset (Arena's --data) and reads where it is from TENANCY_DATASETS
    job = tenancy(hub, "alice", "submit", "--cpu", "1", "--name", "reads-data", "--data", "fashion-mnist", "--wait",
                  "--", "python3", "-c", "import json, os; print(json.loads(os.environ['TENANCY_DATASETS']))")
    assert job.returncode == 0 and "reads-data" in job.stdout and ": done" in job.stdout, job
    wid = job.stdout.split("(")[1].split(")")[0]
    logs = tenancy(hub, "alice", "logs", wid)
    assert "'fashion-mnist'" in logs.stdout, logs
    # dave's team may not use it: refused at submission, one line
    dave = tenancy(hub, "dave", "submit", "--cpu", "1", "--data", "fashion-mnist", "--", "true")
    assert dave.returncode == 1 and dave.stderr == (
        "tenancy: error: dave may not use dataset fashion-mnist: it is not for namespace team-d (HTTP 403)\n"), dave


def test_demo_a_notebook_names_datasets_with_train_data_and_submit_training(hub):
    status, body = hub.start_server("alice", "", {"profile": "small"}, token=token(hub, "alice"), check=False)
    assert status in (201, 202), body
    hub.wait_server_ready("alice", timeout=90)
    # in a thread: Playwright's loop (the module's browser) runs in this one, and run_code starts its own
    out = ThreadPoolExecutor(1).submit(run_code, hub, "alice", token(hub, "alice"), (
        "%load_ext hub_ext.client\n"
        "get_ipython().run_cell_magic('train', '--cpu 1 --name magic-data --data fashion-mnist:/data/fm --wait', "
        "\"import json, os; print(json.loads(os.environ['TENANCY_DATASETS']))\")\n"
        "print(train_job.state, train_job.refresh().data['datasets'][0]['mountPath'])\n"
        "from hub_ext.client import submit_training\n"
        "job = submit_training(['true'], cpu=1, name='py-data', datasets=['fashion-mnist'], show=False, wait=True)\n"
        "print(job.state, [d['name'] for d in job.data['datasets']])\n"), timeout=180).result()
    assert out.split("\n")[:2] == ["Succeeded /data/fm", "Succeeded ['fashion-mnist']"], out
    hub.stop_server("alice", timeout=30)
