"""Real JupyterLab in headless Chromium: every notebook opens as saved, not marked unsaved.

JupyterLab copies the kernel's ``language_info`` into the notebook it opens (and adds an empty one
to a notebook without any); a stored notebook that lacks it, or holds another one, opens with the
tab's "unsaved" dot before anything has run. The stored notebooks hold the project kernel's
(scripts/nbstrip.py keeps it). Served as ``make lab`` serves them: a copy of ``notebooks/`` with
its jupytext pairs and ``jupytext.toml``, so that JupyterLab never writes into the
repository.
"""

import json
import platform
import shutil
import sys

import pytest

from lab_server import jupyter_lab, launch_chromium
from test_browser import CHROMIUM, ROOT, needs_chromium

pytestmark = [pytest.mark.browser, pytest.mark.integration]

NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
SETTLE_MS = 3000


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "scripts"))
    from nbstrip import LANGUAGE_INFO

    if platform.python_version() != LANGUAGE_INFO["version"]:
        pytest.skip(
            f"the notebooks store Python {LANGUAGE_INFO['version']}'s language_info and this "
            f"kernel is {platform.python_version()}'s: they open modified once, by design"
        )
    tmp = tmp_path_factory.mktemp("first_run")
    repo = tmp / "repo"
    shutil.copytree(
        ROOT / "notebooks",
        repo / "notebooks",
        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"),
    )
    with jupyter_lab(repo / "notebooks", tmp) as (url, token, _log):
        yield url, token, repo / "notebooks"


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (scripts/system_deps.sh)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch_chromium(p, CHROMIUM)
        yield b
        b.close()


STATE = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  return {
    dirty: w.context.model.dirty,
    status: w.sessionContext.kernelDisplayStatus,
    kernel: kernel ? kernel.name : null,
    metadata: w.context.model.toJSON().metadata,
    dirtyTabs: Array.from(document.querySelectorAll('.lm-TabBar-tab.jp-mod-dirty'))
      .map(t => t.innerText),
  };
}"""


@needs_chromium
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_notebook_opens_unmodified(lab, browser, name):
    url, token, served = lab
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        # ?reset: a fresh workspace, so that only this notebook opens
        page.goto(f"{url}/lab/tree/{name}?reset&token={token}")
        page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell", timeout=90_000)
        # the kernel has started and answered (its language_info reaches the notebook then)
        page.wait_for_function(
            "() => { const w = window.jupyterapp.shell.currentWidget;"
            " return w && w.sessionContext && w.sessionContext.kernelDisplayStatus === 'idle'; }",
            timeout=120_000,
        )
        page.wait_for_timeout(SETTLE_MS)
        state = page.evaluate(STATE)
        stored = json.loads((served / name).read_text())["metadata"]
        assert state["kernel"] == stored["kernelspec"]["name"], state
        assert not state["dirty"] and not state["dirtyTabs"], (
            f"{name} opens marked unsaved; JupyterLab's metadata {state['metadata']} "
            f"against the stored {stored}"
        )
    finally:
        if page.evaluate("() => !!window.jupyterapp"):  # the kernel stops with the test
            page.evaluate("window.jupyterapp.serviceManager.sessions.shutdownAll()")
        page.close()
