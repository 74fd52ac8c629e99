"""One real JupyterLab in headless Chromium: the steering inspector renders for a person.

Starts ``jupyter lab`` on 127.0.0.1 (free port, token), opens the notebook, runs all cells
through the menu, and waits for the widget's plots and controls. Needs Debian's chromium
(``scripts/system_deps.sh`` installs it) and the ``playwright`` package (no browser download).
"""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.integration]

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    # serve a copy, so that JupyterLab's autosave never writes outputs into the repository
    (tmp_path / "root").mkdir()
    shutil.copy(ROOT / "notebooks" / "10_steering_inspector.ipynb", tmp_path / "root")
    port, token = _free_port(), uuid.uuid4().hex
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path / 'root'}",
         "--ServerApp.open_browser=False", "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError("jupyter lab did not start: " + (tmp_path / "lab.log").read_text()[-2000:])
                time.sleep(0.5)
        yield url, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/system_deps.sh)")
def test_steering_inspector_renders_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright

    url, token = lab
    (ROOT / "runs").mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{url}/lab/tree/10_steering_inspector.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook", timeout=90_000)
            page.wait_for_timeout(3000)
            # JupyterLab may ask which kernel to start: take the notebook's own (preselected)
            select = page.locator(".jp-Dialog button", has_text="Select")
            if select.count():
                select.first.click()
            page.get_by_role("menuitem", name="Run").click()
            page.get_by_text("Run All Cells", exact=True).click()
            if select.count():
                select.first.click()
            page.wait_for_selector(".jp-OutputArea-output .widget-vbox", timeout=180_000)
            page.wait_for_selector(".jp-OutputArea-output img.widget-image", timeout=120_000)
            out = page.locator(".jp-OutputArea-output").last
            assert "Steering inspector" in out.inner_text()
            assert page.locator(".jp-OutputArea-output .widget-select-multiple").count() >= 1
            assert page.locator(".jp-OutputArea-output .widget-slider").count() >= 3
            src = page.locator(".jp-OutputArea-output img.widget-image").first.get_attribute("src")
            assert src and (src.startswith("blob:") or src.startswith("data:image/png"))
        finally:
            # kept for a person to look at when the test fails
            page.screenshot(path=str(ROOT / "runs" / "browser_test.png"), full_page=True)
            browser.close()
