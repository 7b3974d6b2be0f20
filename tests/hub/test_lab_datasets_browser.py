"""Issue 20 in JupyterLab: the tenancy panel's Datasets section (description, read-only or not, the state
in my namespace, the folder as a link that opens it in the file browser) and the submit form's dataset
choice, in headless Chromium. Screenshot: docs/screenshots/lab-datasets.png.

Two tiers. ``test_lab_*`` renders the panel in a real JupyterLab (this checkout's built extension and
server extension) whose tenancy service is the Lab server tests' ``FakeService`` (tests/labserver), set to
answer ``/me`` with the API contract's ``datasets``: the service's own datasets API is built on another
branch; this goes once it is here. ``test_demo_*`` does the same in alice's notebook server of the real
demo hub, and skips, saying so, until the service has datasets.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from browser import browser, logged_in, shot  # noqa: F401 - the fixture
from demo_hub import svc, token
from harness import free_port
from waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "labserver"))
from fake_service import TOKEN, FakeService, serve  # noqa: E402

HAS_DATASETS = importlib.util.find_spec("hub_ext.service.datasets") is not None
BUILT = ROOT / "hub_ext" / "labserver" / "labextension"
TEAM_A = {"group": "team-a", "namespace": "team-a", "quotaLeaf": "root.a.1",
          "priorityClasses": ["low-priority-dev", "high-priority-research"]}
TREE = {"tree": {"spec": {"root": {"name": "root", "children": [{"name": "root.a.1", "namespaces": ["team-a"]}]}}},
        "quota": {"root": {"min": {"cpu": "40"}, "max": {"cpu": "40"}, "used": {"cpu": "2"}},
                  "root.a.1": {"min": {"cpu": "10"}, "max": {"cpu": "20"}, "used": {"cpu": "2"}}}}
DATASETS = [  # /me's datasets, the contract's shape (once per namespace of mine, with the words why)
    {"name": "fashion-mnist", "description": "Fashion-MNIST, 70,000 28x28 images",
     "mountPath": "/datasets/fashion-mnist", "readOnly": True, "state": "Bound", "message": None, "namespace": "team-a"},
    {"name": "scratch", "description": "Team scratch space", "mountPath": "/datasets/scratch", "readOnly": False,
     "state": "Bound", "message": None, "namespace": "team-a"},
    {"name": "imagenet-mini", "description": "ImageNet, 1,000 classes", "mountPath": "/datasets/imagenet-mini",
     "readOnly": True, "state": "Refused", "namespace": "team-a",
     "message": 'persistentvolumeclaims "imagenet-mini" is forbidden: exceeded quota: dev-quota'},
]


@pytest.fixture(scope="module")
def service():
    """``FakeService`` on a loop of its own thread (the browser tests are synchronous)."""
    loop = asyncio.new_event_loop()

    async def start():
        return serve(FakeService())

    fake = loop.run_until_complete(start())
    fake.me = {"name": "alice", "tenants": [TEAM_A], "workloads": [], "notices": [], "datasets": DATASETS}
    fake.tree = TREE
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield fake
    asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


@pytest.fixture(scope="module")
def lab(service, tmp_path_factory):
    """A real JupyterLab with this checkout's extension, in a root holding fashion-mnist's folder
    as the local backend lays it out (``datasets/<name>``), the server's ``TENANCY_DATASETS`` saying so."""
    if not (BUILT / "package.json").is_file():
        pytest.fail("the Lab extension is not built: scripts/build-labextension", pytrace=False)
    work = tmp_path_factory.mktemp("lab-datasets")
    root = work / "root"
    data = root / "datasets" / "fashion-mnist"
    data.mkdir(parents=True)
    (data / "train-images.npy").write_bytes(b"\x93NUMPY")
    (data / "README.txt").write_text("Fashion-MNIST sample\n")
    share = work / "share" / "labextensions"
    share.mkdir(parents=True)
    (share / "jupyterhub-tenancy").symlink_to(BUILT)  # found before the virtualenv's (JUPYTER_PATH comes first)
    port, secret = free_port(), "lab-datasets-token"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JUPYTER_PATH": str(work / "share"),
           "JUPYTER_CONFIG_DIR": str(work / "config"), "JUPYTER_DATA_DIR": str(work / "data"),
           "JUPYTER_RUNTIME_DIR": str(work / "runtime"), "TENANCY_API_URL": service.url,
           "JUPYTERHUB_API_TOKEN": TOKEN, "TENANCY_DATASETS": json.dumps({"fashion-mnist": str(data),
                                                                           "scratch": "/datasets/scratch"})}
    log = open(work / "lab.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
                             f"--ServerApp.root_dir={root}", f"--IdentityProvider.token={secret}",
                             "--ServerApp.jpserver_extensions=hub_ext.labserver=True",
                             *(["--allow-root"] if os.geteuid() == 0 else []),
                             "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=work)
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        import urllib.request
        try:
            return urllib.request.urlopen(f"{url}/api/status?token={secret}", timeout=5).status == 200
        except OSError:
            return False

    try:
        wait_for(answers, "JupyterLab to answer", timeout=90)
        yield {"url": f"{url}/lab?token={secret}", "root": root, "log": work / "lab.log"}
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def open_panel(page, lab_url):
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(lab_url)
    page.wait_for_selector(".jp-TenancyStatus", timeout=60_000)
    wait_for(lambda: "team-a" in page.inner_text(".jp-TenancyStatus"), "the status bar to show the team")
    # JupyterLab's own first-run question about news covers the panel's lower part: "No".
    news = page.locator(".Toastify__toast", has_text="official Jupyter news").locator("button", has_text="No")
    try:
        news.click(timeout=4000)
    except Exception:  # noqa: BLE001 - asked only once per browser profile
        pass
    page.click(".jp-TenancyStatus")
    page.wait_for_selector("#jp-tenancy-panel .jp-TenancyDataset", state="visible")
    return errors


def test_lab_the_panel_lists_my_datasets_and_opens_one_in_the_file_browser(service, lab, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1250})
    page = context.new_page()
    errors = open_panel(page, lab["url"])
    rows = page.locator("#jp-tenancy-panel .jp-TenancyDataset")
    assert rows.evaluate_all("rs => rs.map(r => [r.dataset.dataset, r.dataset.state])") == [
        ["fashion-mnist", "Bound"], ["scratch", "Bound"], ["imagenet-mini", "Refused"]]
    fashion = rows.nth(0)
    assert fashion.locator(".jp-TenancyDataset-state").inner_text() == "ready"
    assert fashion.locator(".jp-TenancyDataset-description").inner_text() == "Fashion-MNIST, 70,000 28x28 images"
    assert fashion.locator(".jp-TenancyDataset-access").inner_text() == "read-only"
    link = fashion.locator("a.jp-TenancyDataset-path")
    assert link.inner_text() == "datasets/fashion-mnist/"
    assert link.get_attribute("title") == f"Open {lab['root']}/datasets/fashion-mnist in the file browser"
    scratch = rows.nth(1)
    assert scratch.locator(".jp-TenancyDataset-access").inner_text() == "read and write"
    assert scratch.locator("a").count() == 0  # outside the file browser's root: the path, and what to do
    assert "outside the file browser" in scratch.locator(".jp-TenancyWork-reason").inner_text()
    assert rows.nth(2).locator(".jp-TenancyDataset-state").inner_text() == "refused"
    assert rows.nth(2).locator(".jp-TenancyWork-reason").inner_text() == (
        'Not ready in your namespace: persistentvolumeclaims "imagenet-mini" is forbidden: exceeded quota: '
        "dev-quota. Jobs that name it wait until it is.")
    # the link opens the folder in the file browser
    link.click()
    listing = page.locator(".jp-DirListing-content .jp-DirListing-itemText")
    wait_for(lambda: "train-images.npy" in listing.all_inner_texts(), "the file browser to show the dataset's files")
    assert re.search(r"datasets\s*/\s*fashion-mnist", page.inner_text(".jp-BreadCrumbs"))
    # the submit form offers them; the chosen ones go in the body
    page.click(".jp-TenancyStatus")
    page.wait_for_selector("#jp-tenancy-panel .jp-TenancySubmit-datasets", state="visible")
    assert page.locator(".jp-TenancySubmit-datasets option").all_inner_texts() == [
        "fashion-mnist", "scratch", "imagenet-mini (refused)"]
    page.select_option(".jp-TenancySubmit-datasets", ["fashion-mnist", "scratch"])
    page.fill(".jp-TenancySubmit-text", "python train.py")
    page.locator("#jp-tenancy-panel .jp-TenancyDataset").first.scroll_into_view_if_needed()
    shot(page, "lab-datasets")
    page.click(".jp-TenancySubmit button[type=submit]")
    wait_for(lambda: any(m == "POST" and p == "/workloads" for m, p, _, _ in service.asked), "the job to be submitted")
    bodies = [json.loads(b) for m, p, _, b in service.asked if m == "POST" and p.startswith("/workloads")]
    assert [b["datasets"] for b in bodies] == [["fashion-mnist", "scratch"]] * 2  # the dry run, then the job
    assert not errors, errors
    context.close()


# -- the same in the demo hub, against the real service ----------------------------------------------------

@pytest.fixture(scope="module")
def hub(hub_factory):
    if not HAS_DATASETS:
        pytest.skip("the service has no datasets API on this branch yet (hub_ext.service.datasets)")
    # the demo's dataset folder lives in the work dir: the accounts must be able to cross it, which a
    # pytest tmp dir (0700) forbids
    work = Path(tempfile.mkdtemp(prefix="tenancy-lab-datasets-hub-", dir="/tmp"))
    os.chmod(work, 0o711)
    # alice's server runs this checkout's Lab extension (JUPYTER_PATH is searched before the virtualenv)
    share = work / "share"
    (share / "labextensions").mkdir(parents=True)
    (share / "labextensions" / "jupyterhub-tenancy").symlink_to(BUILT)
    os.chmod(share, 0o755)
    os.chmod(share / "labextensions", 0o755)
    extra = f"c.Spawner.environment = {{**c.Spawner.environment, 'JUPYTER_PATH': {str(share)!r}}}\n"
    try:
        with hub_factory("lab-datasets-hub", work=work, extra_config=extra) as h:
            yield h
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.skipif(not HAS_DATASETS, reason="the service has no datasets API on this branch yet "
                    "(hub_ext.service.datasets is not importable): test_lab_* above stands in")
def test_demo_alices_panel_shows_fashion_mnist_and_a_job_names_it(hub, browser):
    status, body = hub.start_server("alice", "", {"profile": "small"}, token=token(hub, "alice"), check=False)
    assert status in (201, 202), body
    hub.wait_server_ready("alice", timeout=90)
    page = logged_in(browser, hub, "alice", width=1400, height=900)
    errors = open_panel(page, hub.url("/user/alice/lab"))
    fashion = page.locator("#jp-tenancy-panel .jp-TenancyDataset[data-dataset=fashion-mnist]")
    assert fashion.get_attribute("data-state") == "Bound"
    assert fashion.locator(".jp-TenancyDataset-access").inner_text() == "read-only"
    fashion.locator("a.jp-TenancyDataset-path").click()  # the local backend: datasets/<name> in the home
    wait_for(lambda: page.locator(".jp-DirListing-content .jp-DirListing-item").count() > 0,
             "the file browser to show the dataset's files")
    page.click(".jp-TenancyStatus")
    page.select_option(".jp-TenancySubmit-datasets", ["fashion-mnist"])
    page.fill(".jp-TenancySubmit-text", "python3 -c \"import os; print(os.environ['TENANCY_DATASETS'])\"")
    page.fill(".jp-TenancySubmit-name", "lab-data-job")
    page.click(".jp-TenancySubmit button[type=submit]")
    wait_for(lambda: any(w["name"] == "lab-data-job" for w in
                         svc(hub, "alice", "GET", "/workloads?mine=true&kind=training")[1]["workloads"]),
             "the job to be submitted")
    job = next(w for w in svc(hub, "alice", "GET", "/workloads?mine=true&kind=training")[1]["workloads"]
               if w["name"] == "lab-data-job")
    assert [d["name"] for d in job["datasets"]] == ["fashion-mnist"]
    assert not errors, errors
    page.context.close()
    hub.stop_server("alice", timeout=30)
