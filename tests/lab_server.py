"""``jupyter lab`` for the browser tests: started on 127.0.0.1 (a free port, a token) with its
configuration, runtime and data kept under the test's directory, stopped afterwards."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def jupyter_lab(
    root_dir: Path, scratch: Path, env: dict | None = None, timeout: float = 90
) -> Iterator[tuple[str, str, Path]]:
    """Serve ``root_dir``; yield (url, token, log path) once the server answers."""
    port, token = free_port(), uuid.uuid4().hex
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "JUPYTER_CONFIG_DIR": str(scratch / "cfg"),
        "JUPYTER_RUNTIME_DIR": str(scratch / "rt"),
        "JUPYTER_DATA_DIR": str(scratch / "data"),
        "JUPYTERLAB_WORKSPACES_DIR": str(scratch / "ws"),
        **(env or {}),
    }
    # no "get notified about Jupyter news?" toast over what the tests look at and screenshot
    news = scratch / "cfg" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True, exist_ok=True)
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    log_path = scratch / "lab.log"
    with open(log_path, "w") as log:  # closed after the server has stopped
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter",
                "lab",
                "--no-browser",
                f"--port={port}",
                "--ip=127.0.0.1",
                *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={root_dir}",
                "--ServerApp.open_browser=False",
                "--LabApp.news_url=",
                "--LabApp.expose_app_in_browser=True",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + timeout
            while True:
                try:
                    urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                    break
                except OSError as e:
                    if time.time() > deadline or proc.poll() is not None:
                        raise RuntimeError(
                            "jupyter lab did not start: " + log_path.read_text()[-2000:]
                        ) from e
                    time.sleep(0.5)
            yield url, token, log_path
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


#: Chromium flags for a headless run with no network of its own.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def launch_chromium(playwright, executable: str):
    """Debian's chromium through playwright, with :data:`CHROMIUM_ARGS`."""
    return playwright.chromium.launch(executable_path=executable, args=list(CHROMIUM_ARGS))


def accept_dialog(page) -> None:
    """Take the preselected choice of a JupyterLab dialog (kernel choice, restart), if one is open."""
    button = page.locator(".jp-Dialog .jp-mod-accept")
    if button.count():
        button.first.click()


def open_notebook(page, url: str, token: str, path: str, settle_ms: int = 3000) -> None:
    """Open ``path`` (relative to the served root) in JupyterLab and take the kernel it offers;
    a notebook that does not open fails with what JupyterLab's dialog said."""
    page.goto(f"{url}/lab/tree/{path}?token={token}")
    try:
        page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=90_000)
    except Exception:
        dialog = page.locator(".jp-Dialog")
        raise AssertionError(
            "the notebook did not open: " + (dialog.inner_text() if dialog.count() else "")
        ) from None
    page.wait_for_timeout(settle_ms)
    wait_for_kernel(page)


def kernel_status(page) -> str:
    """The current notebook's kernel status as JupyterLab shows it ("idle", "busy", "starting",
    "unknown" while it has none)."""
    return page.evaluate(
        "() => { const w = window.jupyterapp.shell.currentWidget;"
        " const k = w && w.sessionContext && w.sessionContext.session"
        " && w.sessionContext.session.kernel; return k ? k.status : 'unknown'; }"
    )


def wait_for_kernel(page, timeout_s: float = 240) -> None:
    """Wait until the open notebook's kernel is idle, taking the kernel JupyterLab offers when
    its dialog appears: on a loaded machine the dialog can come seconds after the notebook
    shows, and cells run before a kernel is chosen wait for it for ever."""
    deadline, status = time.time() + timeout_s, "unknown"
    while time.time() < deadline:
        accept_dialog(page)
        status = kernel_status(page)
        if status == "idle":
            return
        page.wait_for_timeout(300)
    raise AssertionError(f"the notebook's kernel is not ready after {timeout_s:.0f} s: {status}")


def run_all_cells(page) -> None:
    """Run > Run All Cells, taking the kernel JupyterLab offers if it asks."""
    page.get_by_role("menuitem", name="Run").click()
    page.get_by_text("Run All Cells", exact=True).click()
    accept_dialog(page)


@contextmanager
def notebook_page(url: str, token: str, notebook: str, executable: str, final_shot: Path):
    """Headless Chromium at 1,400 x 1,000 with ``notebook`` open and all its cells run; a
    full-page screenshot goes to ``final_shot`` on exit, whether the test passed or not."""
    from playwright.sync_api import sync_playwright

    final_shot.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = launch_chromium(p, executable)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            # JupyterLab may ask which kernel to start: open_notebook takes the notebook's own
            open_notebook(page, url, token, notebook)
            run_all_cells(page)
            yield page
        finally:
            page.screenshot(path=str(final_shot), full_page=True)
            browser.close()
