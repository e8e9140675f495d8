"""The real Marathon web UI (mesosphere/marathon-ui 1.3.1 build, ../shared/marathon-ui/build) served by
``local serve --ui`` and driven in headless Chromium (Debian's chromium + chromium-driver, via selenium).

Skipped, with the reason, where the UI build, selenium or Chromium is missing (.ci/run installs them)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from polling import wait_for

from marathon_tf.local import LocalCluster

UI_BUILD = Path(__file__).resolve().parents[2].parent / "shared" / "marathon-ui" / "build"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1000")
#: The UI asks every server whether it is DC/OS (pkgpanda build info) before reading Mesos; a plain
#: Marathon answers 404, so does local serve (a 200 would switch the UI to DC/OS's admin-router paths).
DCOS_PROBE = "/pkgpanda/active.buildinfo.full.json"

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not (UI_BUILD / "index.html").is_file(),
                       reason=f"no Marathon UI build at {UI_BUILD} (see docs/local-mode.md, 'the web UI')"),
    pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                       reason="Chromium is not installed (apt-get install -y chromium chromium-driver)"),
]


@pytest.fixture
def served(tmp_path):
    """A local Marathon serving the UI, with one running app ``/demo/sleeper``."""
    with LocalCluster(state_dir=tmp_path / "state", ui_dir=UI_BUILD, shutdown_grace=0.5, kill_grace=0.5) as c:
        r = requests.put(c.marathon_url + "/v2/groups/demo", timeout=10, json={"apps": [
            {"id": "/demo/sleeper", "cmd": "echo hello from the sandbox; exec sleep 600", "cpus": 0.1, "mem": 32}]})
        r.raise_for_status()
        wait_for(lambda: [t for t in requests.get(c.marathon_url + "/v2/apps/demo/sleeper/tasks", timeout=10)
                          .json()["tasks"] if t["state"] == "TASK_RUNNING"], 30, what="the app's task")
        yield c


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="marathon-tf-chromium-")
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    from selenium.webdriver.chrome.service import Service
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _responses(driver, base: str, seen: list) -> list[tuple[int, str]]:
    """(status, url) of every response from ``base`` since the last call, added to ``seen``."""
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.responseReceived":
            response = message["params"]["response"]
            if response["url"].startswith(base):
                seen.append((response["status"], response["url"][len(base):]))
    return seen


def _text(driver, timeout: float = 30):
    """Wait until the page's text satisfies a predicate; returns the waiter."""
    def until(predicate, what: str) -> str:
        return WebDriverWait(driver, timeout).until(
            lambda d: (lambda t: t if predicate(t) else False)(d.find_element(By.TAG_NAME, "body").text),
            message=what)
    return until


def test_the_marathon_ui_works_on_local_serve(served, browser):
    """Apps list, Edit, Debug task statistics, sandbox files, Mesos details, rollback; no failing request."""
    base = served.marathon_url
    app = "#/apps/" + quote("/demo/sleeper", safe="")
    task_id = requests.get(base + "/v2/apps/demo/sleeper/tasks", timeout=10).json()["tasks"][0]["id"]
    seen: list[tuple[int, str]] = []
    until = _text(browser)

    # / is the UI; the group lists the deployed app as running
    browser.get(base + "/")
    assert browser.current_url.startswith(base + "/ui/")
    browser.get(base + "/ui/#/group/" + quote("/demo", safe=""))
    until(lambda t: "sleeper" in t and "Running" in t, "the apps list to show sleeper as Running")

    # Edit opens the configuration of the current version
    browser.get(base + "/ui/" + app + "/configuration")
    until(lambda t: "Edit" in t and "hello from the sandbox" in t, "the configuration tab")
    next(b for b in browser.find_elements(By.TAG_NAME, "button") if "Edit" in b.text).click()
    until(lambda t: "Edit Application" in t or "Error Loading Configuration" in t, "the edit dialog")
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "Error Loading Configuration" not in body
    assert any("hello from the sandbox" in (e.get_attribute("value") or "")
               for e in browser.find_elements(By.CSS_SELECTOR, ".modal input, .modal textarea"))

    # the Debug tab shows task statistics
    browser.get(base + "/ui/" + app + "/debug")
    text = until(lambda t: "Task Statistics" in t and "Total Summary" in t, "task statistics")
    assert "does not have task statistics" not in text

    # the task page lists the sandbox files (read from the Mesos endpoints as JSONP)
    browser.get(base + "/ui/" + app + "/" + quote(task_id, safe=""))
    text = until(lambda t: "Working Directory" in t and "stdout" in t and "stderr" in t, "the sandbox files")
    assert "Download" in text and "No link available" not in text
    link = next(a.get_attribute("href") for a in browser.find_elements(By.TAG_NAME, "a")
                if "files/download" in (a.get_attribute("href") or "") and "stdout" in a.get_attribute("href"))
    assert requests.get(link, timeout=10).text.startswith("hello from the sandbox")

    # "Mesos details" leads to the task's sandbox too (there is no Mesos UI behind the local runner)
    mesos = next(a.get_attribute("href") for a in browser.find_elements(By.TAG_NAME, "a")
                 if "/mesos/#/slaves/" in (a.get_attribute("href") or ""))
    browser.get(mesos)
    until(lambda t: "Sandbox of " + task_id in t and "stdout" in t, "the Mesos details page")

    # a config change keeps the old version; "Apply" on it rolls back
    requests.put(base + "/v2/apps/demo/sleeper", json={"env": {"CHANGED": "1"}}, timeout=10).raise_for_status()
    wait_for(lambda: requests.get(base + "/v2/deployments", timeout=10).json() == [], 30, what="the change")
    browser.get(base + "/ui/" + app + "/configuration")
    until(lambda t: "Older versions" in t and "CHANGED" in t, "the version list")
    browser.find_element(By.CSS_SELECTOR, ".panel-heading.clickable time").click()
    WebDriverWait(browser, 30).until(lambda d: [b for b in d.find_elements(By.TAG_NAME, "button")
                                                if "Apply" in b.text], message="Apply")[0].click()
    wait_for(lambda: requests.get(base + "/v2/apps/demo/sleeper", timeout=10).json()["app"]["env"] == {}, 30,
             what="the rollback")
    assert len(requests.get(base + "/v2/apps/demo/sleeper/versions", timeout=10).json()["versions"]) == 3

    seen = _responses(browser, base, seen)
    paths = {path.split("?")[0] for _, path in seen}
    assert {"/v2/apps//demo/sleeper/versions", "/mesos/master/state", "/files/browse"} <= paths, paths
    failed = [(status, path) for status, path in seen if status >= 400 and path != DCOS_PROBE]
    assert failed == [], failed
