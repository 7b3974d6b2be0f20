"""Issue 20, people's side: the Datasets page of the hub's Services menu in headless Chromium (a user's
view: their teams' datasets only; an admin's: every dataset, a dry run of a new one that says what would
be provisioned or refused, apply, remove, the audit trail), and ``tenancy datasets`` / ``tenancy submit
--data`` in a terminal. Screenshots: docs/screenshots/datasets-page.png, datasets-admin.png.

Two tiers. The rendering tests (``test_page_*``) run the page's real template, static files and script
against ``datasets_fixture``, a stand-in serving recorded answers of the API contract's shapes, because
the service's datasets API (``hub_ext.service.datasets``) is built on another branch; they go once it is
here. The end-to-end tests (``test_demo_*``) run the same against the real demo hub and skip, saying so,
until the service has datasets.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from browser import browser, logged_in, shot  # noqa: F401 - the fixture
from datasets_fixture import serve_fake_datasets
from demo_hub import API, ROOT, svc, token
from kernel import run_code
from waiting import wait_for

PAGES = "/services/tenancy/"
HAS_DATASETS = importlib.util.find_spec("hub_ext.service.datasets") is not None
NEEDS_SERVICE = pytest.mark.skipif(not HAS_DATASETS, reason="the service has no datasets API on this branch yet "
                                   "(hub_ext.service.datasets is not importable): the rendering tests above stand in")

NEW = """\
apiVersion: tenancy.jupyter.org/v1alpha1
kind: Dataset
metadata: {name: cifar-10}
spec:
  description: CIFAR-10, 60,000 32x32 images
  teams: [team-c, team-d]
  source: {path: /srv/datasets/cifar-10}
"""


def ready(page, errors):
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.wait_for_function("window.tenancyPageReady === true")
    page.wait_for_selector("#datasets section.dataset, #no-datasets, #datasets .notice")


# -- the page, rendered against the stand-in (until the service has datasets) -----------------------------

@pytest.fixture(scope="module")
def fake():
    fake, stop = serve_fake_datasets()
    yield fake
    stop()


def open_fake(browser, fake, user, **size):
    context = browser.new_context(viewport={"width": 1280, "height": 800, **size})
    page = context.new_page()
    errors = []
    page.goto(f"{fake.url}/as/{user}/datasets")
    ready(page, errors)
    return page, errors


def test_page_a_user_sees_their_teams_datasets_with_each_namespaces_state(fake, browser):
    page, errors = open_fake(browser, fake, "alice")
    assert page.title() == "Datasets · Tenancy"
    assert page.locator("nav a[aria-current=page]").inner_text() == "Datasets"
    assert page.locator("section.dataset h2").all_inner_texts() == ["fashion-mnist read-only"]
    facts = page.locator("section[data-dataset=fashion-mnist] dl.facts")
    assert facts.locator("dd[data-fact=description]").inner_text() == "Fashion-MNIST, 70,000 28x28 images"
    assert facts.locator("dd[data-fact=source]").inner_text() == "a folder: /srv/datasets/fashion-mnist"
    assert facts.locator("dd[data-fact='mounted at']").inner_text() == "/datasets/fashion-mnist"
    assert facts.locator("dd[data-fact=access]").inner_text() == "read-only"
    assert facts.locator("dd[data-fact=capacity]").inner_text() == "a folder: no fixed size"
    rows = page.locator("section[data-dataset=fashion-mnist] table.namespaces tbody tr")
    assert rows.count() == 1  # team-b's row is not alice's to see
    assert rows.first.inner_text().split("\t") == ["team-a", "ready", "", "1 running workload"]
    assert page.locator("#manifest").count() == 0 and page.locator("button[data-action=edit]").count() == 0
    assert page.locator("dd[data-fact='declared in']").count() == 0
    shot(page, "datasets-page")
    assert not errors, errors
    page.context.close()
    page, errors = open_fake(browser, fake, "dave")
    rows = page.locator("section[data-dataset=imagenet-mini] table.namespaces tbody tr")
    assert rows.count() == 1
    assert rows.first.get_attribute("data-state") == "Refused"
    assert rows.first.locator("td.why").inner_text().startswith('persistentvolumeclaims "imagenet-mini" is forbidden: '
                                                               "exceeded quota: dev-quota")
    assert rows.first.locator("td.in-use").inner_text() == "not in use"
    assert not errors, errors
    page.context.close()


def test_page_an_admin_dry_runs_a_new_dataset_applies_it_and_removes_it(fake, browser):
    page, errors = open_fake(browser, fake, "admin", height=1000)
    assert page.locator("section.dataset").count() == 2
    imagenet = page.locator("section[data-dataset=imagenet-mini]")
    states = imagenet.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.state)")
    assert states == ["Pending", "Refused"]
    assert imagenet.locator("dd[data-fact=capacity]").inner_text() == "10 GiB"
    assert imagenet.locator("dd[data-fact=access]").inner_text() == "read-only · ReadWriteMany"
    # declared in the configuration: not this page's to change, and it says where
    edit = page.locator("section[data-dataset=fashion-mnist] button[data-action=edit]")
    assert edit.is_disabled() and "configuration" in edit.get_attribute("title")
    assert "the service's configuration" in page.inner_text("section[data-dataset=fashion-mnist] dd[data-fact='declared in']")
    # made here: its manifest comes into the editor as YAML
    imagenet.locator("button[data-action=edit]").click()
    assert "name: imagenet-mini" in page.input_value("#manifest") and "storage: 10Gi" in page.input_value("#manifest")
    # not YAML, then a dataset without a name: said at once, nothing sent
    asked = len(fake.asked)
    page.fill("#manifest", "spec: [\n")
    page.click("#dry-run")
    page.wait_for_selector("#invalid")
    page.fill("#manifest", "kind: Dataset\nspec: {}\n")
    page.click("#dry-run")
    page.wait_for_selector("#invalid >> text=metadata.name is missing")
    assert len(fake.asked) == asked and page.is_disabled("#apply")
    # a new one: the dry run says what each namespace would get, and nothing changes
    page.fill("#manifest", NEW)
    page.click("#dry-run")
    page.wait_for_selector("#provision li")
    items = page.locator("#provision li")
    assert items.all_inner_texts()[0] == "team-c: would be provisioned"
    assert "team-d: would be refused — persistentvolumeclaims" in items.all_inner_texts()[1]
    assert "1 namespace would refuse it" in page.inner_text("#provision")
    assert fake.asked[-1][:3] == ("admin", "PUT", "datasets/cifar-10?dryRun=true")
    assert fake.asked[-1][3]["spec"]["teams"] == ["team-c", "team-d"]  # the YAML, sent as JSON
    assert "cifar-10" not in fake.datasets and page.locator("section[data-dataset=cifar-10]").count() == 0
    page.locator("#editor-section").scroll_into_view_if_needed()
    shot(page, "datasets-admin")
    # an edit after the dry run needs another one: apply asks again first
    page.fill("#manifest", NEW.replace("team-d", "team-b"))
    assert page.is_disabled("#apply")
    page.click("#dry-run")
    page.wait_for_selector("#provision li[data-namespace=team-b]")
    page.click("#apply")
    page.wait_for_selector("#applied")
    assert ("admin", "PUT", "datasets/cifar-10") in [a[:3] for a in fake.asked]
    page.wait_for_selector("section[data-dataset=cifar-10]")
    page.wait_for_selector("#audit td >> text=dataset cifar-10: declared for team-c, team-b")
    # remove: asked once more on the page, then gone, and in the trail
    page.click("section[data-dataset=cifar-10] button[data-action=remove]")
    page.click("section[data-dataset=cifar-10] button[data-action=confirm-remove]")
    page.wait_for_selector("#removed")
    wait_for(lambda: page.locator("section[data-dataset=cifar-10]").count() == 0, "cifar-10 to go from the page")
    assert ("admin", "DELETE", "datasets/cifar-10") in [a[:3] for a in fake.asked]
    page.wait_for_selector("#audit td >> text=admin removed dataset cifar-10")
    assert not errors, errors
    page.context.close()


# -- the same against the real service of the demo hub -------------------------------------------------------

@pytest.fixture(scope="module")
def hub(hub_factory):
    if not HAS_DATASETS:
        pytest.skip("the service has no datasets API on this branch yet (hub_ext.service.datasets)")
    # the demo's dataset folder lives in the work dir: the accounts must be able to cross it, which a
    # pytest tmp dir (0700) forbids
    work = Path(tempfile.mkdtemp(prefix="tenancy-datasets-people-hub-", dir="/tmp"))
    os.chmod(work, 0o711)
    try:
        with hub_factory("datasets-people-hub", work=work) as h:
            yield h
    finally:
        shutil.rmtree(work, ignore_errors=True)


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


@NEEDS_SERVICE
def test_demo_a_user_sees_their_teams_datasets_and_an_admin_dry_runs_applies_and_removes(hub, browser):
    wait_for(lambda: bound(hub, "fashion-mnist", "team-a"), "fashion-mnist to be ready in team-a",
             show=lambda: svc(hub, "admin", "GET", "/datasets/fashion-mnist"))
    page = logged_in(browser, hub, "alice")
    errors = open_page(page, hub, "datasets")
    assert page.locator("section.dataset h2").all_inner_texts() == ["fashion-mnist read-only"]
    assert page.locator("section[data-dataset=fashion-mnist] tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.namespace, r.dataset.state])") == [["team-a", "Bound"]]
    shot(page, "datasets-page")
    assert not errors, errors
    page.context.close()
    page = logged_in(browser, hub, "dave")
    open_page(page, hub, "datasets")
    assert page.locator("section.dataset").count() == 0 and page.locator("#no-datasets").count() == 1
    page.context.close()
    page = logged_in(browser, hub, "admin", height=1000)
    errors = open_page(page, hub, "datasets")
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


@NEEDS_SERVICE
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


@NEEDS_SERVICE
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
