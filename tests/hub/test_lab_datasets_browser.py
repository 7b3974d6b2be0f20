"""Issue 20 in JupyterLab: the tenancy panel's Datasets section (description, read-only or not, the state
in my namespace, the folder as a link that opens it in the file browser) and the submit form's dataset
choice, in headless Chromium, in alice's notebook server of the real demo hub (this checkout's built
extension). Screenshot: docs/screenshots/lab-datasets.png.
"""

from __future__ import annotations


import pytest

from browser import browser, logged_in, shot  # noqa: F401 - the fixture
from demo_hub import svc, token
from waiting import wait_for

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


@pytest.fixture(scope="module")
def hub(datasets_hub):
    return datasets_hub  # one hub for the datasets modules (conftest.py)


def test_demo_alices_panel_shows_fashion_mnist_and_a_job_names_it(hub, browser):
    status, body = hub.start_server("alice", "", {"profile": "small"}, token=token(hub, "alice"), check=False)
    assert status in (201, 202), body
    hub.wait_server_ready("alice", timeout=90)
    page = logged_in(browser, hub, "alice", width=1400, height=900)
    errors = open_panel(page, hub.url("/user/alice/lab"))
    fashion = page.locator("#jp-tenancy-panel .jp-TenancyDataset[data-dataset=fashion-mnist]")
    assert fashion.get_attribute("data-state") == "Bound"
    assert fashion.locator(".jp-TenancyDataset-access").inner_text() == "read-only"
    fashion.scroll_into_view_if_needed()  # the section is below the quota and the workloads
    shot(page, "lab-datasets")
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
