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
KERNEL_MS = 120_000  # one kernel's start and first answer


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
    with jupyter_lab(repo / "notebooks", tmp) as (url, token, log):
        yield url, token, repo / "notebooks", log


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (scripts/system_deps.sh)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch_chromium(p, CHROMIUM)
        yield b
        b.close()


#: Wait until notebook panel ``w`` has started its kernel and had its answer to ``kernel_info``
#: (its language_info reaches the notebook then); awaited, not read off the kernel's displayed
#: status. Gives null, or, for a notebook marked unsaved once loaded (at once) or a kernel with no
#: answer within ``ms``, what JupyterLab says of it.
ANSWERED = """async (w, ms) => {
  const answered = (async () => {
    await w.sessionContext.ready;
    await w.sessionContext.session.kernel.info;
    return true;
  })();
  const start = Date.now();
  let poll;
  const dirtyOrLate = new Promise(done => { poll = setInterval(() => {
    if ((w.context.isReady && w.context.model.dirty) || Date.now() - start > ms) done(false);
  }, 200); });
  const ok = await Promise.race([answered, dirtyOrLate]);
  clearInterval(poll);  // whichever came first, the poll is done
  if (ok) return null;
  const s = w.sessionContext;
  return {name: w.context.path, status: s.kernelDisplayStatus,
          kernel: s.session && s.session.kernel ? s.session.kernel.connectionStatus : null,
          dirty: w.context.model.dirty};
}"""

#: Open the notebooks one after another in the current workspace, each once the one before has
#: its kernel's answer. One start at a time: eleven kernels launched at once on a loaded 2-core
#: machine are what a shared runner must not depend on. Gives null or the first ``ANSWERED``
#: failure.
OPEN_ALL = f"""async ([names, ms]) => {{
  const app = window.jupyterapp;
  await app.restored;
  for (const name of names) {{
    const w = await app.commands.execute('docmanager:open', {{path: name, factory: 'Notebook'}});
    const stuck = await ({ANSWERED})(w, ms);
    if (stuck) return stuck;
  }}
  return null;
}}"""


def _stuck(stuck: dict, log) -> str:
    """The failure message for what ``ANSWERED`` gave back."""
    return (
        f"{stuck['name']} opened marked unsaved or its kernel did not answer in "
        f"{KERNEL_MS // 1000} s: {stuck}; JupyterLab's log ends: " + log.read_text()[-3000:]
    )


def _open_alone(page, url: str, token: str, name: str, log) -> None:
    """Open notebook ``name`` in a fresh workspace (``?reset``: only it opens) and wait until
    its kernel has started and answered."""
    page.goto(f"{url}/lab/tree/{name}?reset&token={token}")
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell", timeout=90_000)
    stuck = page.evaluate(
        f"(ms) => ({ANSWERED})(window.jupyterapp.shell.currentWidget, ms)", KERNEL_MS
    )
    assert stuck is None, _stuck(stuck, log)


PANELS = """() => Array.from(window.jupyterapp.shell.widgets('main'))
  .filter(w => w.context && w.sessionContext)"""

STATES = f"""() => ({PANELS})().map(w => {{
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  return {{
    path: w.context.path,
    dirty: w.context.model.dirty,
    kernel: kernel ? kernel.name : null,
    metadata: w.context.model.toJSON().metadata,
  }};
}})"""


@needs_chromium
def test_every_notebook_opens_unmodified(lab, browser):
    """All notebooks open side by side in one fresh workspace, each once the one before has
    its kernel's answer; once the last has answered (its language_info reaches the notebook
    then) and a moment more, none is marked unsaved and each runs its stored kernel. (A
    notebook without language_info stays marked unsaved, its kernel "initializing".)"""
    url, token, served, log = lab
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{url}/lab?reset&token={token}")
        page.wait_for_function(
            "() => window.jupyterapp && window.jupyterapp.commands.hasCommand('docmanager:open')",
            timeout=90_000,
        )
        stuck = page.evaluate(OPEN_ALL, [NOTEBOOKS, KERNEL_MS])
        assert stuck is None, _stuck(stuck, log)
        page.wait_for_timeout(SETTLE_MS)
        states = {s["path"]: s for s in page.evaluate(STATES)}
        dirty_tabs = page.evaluate(
            "() => Array.from(document.querySelectorAll('.lm-TabBar-tab.jp-mod-dirty'))"
            ".map(t => t.innerText)"
        )
        assert sorted(states) == NOTEBOOKS
        assert not dirty_tabs, f"tabs marked unsaved: {dirty_tabs}"
        for name in NOTEBOOKS:
            state = states[name]
            stored = json.loads((served / name).read_text())["metadata"]
            assert state["kernel"] == stored["kernelspec"]["name"], state
            assert not state["dirty"], (
                f"{name} opens marked unsaved; JupyterLab's metadata {state['metadata']} "
                f"against the stored {stored}"
            )
    finally:
        if page.evaluate("() => !!window.jupyterapp"):  # the kernels stop with the test
            page.evaluate("window.jupyterapp.serviceManager.sessions.shutdownAll()")
        page.close()


@needs_chromium
def test_a_parameter_saved_in_lab_reaches_the_source_and_the_command_line(
    lab, browser, tiny_model_dir, tmp_path
):
    """The loop: edit a parameter in JupyterLab (served as ``make lab`` serves it), save; the
    paired ``src/*.py`` holds the new value, and ``python -m workbench params`` and ``run`` use
    it. (With jupytext's configuration above the served folder, saving wrote the ``.ipynb``
    alone and the command line refused the pair.)"""
    import os
    import subprocess
    import time

    url, token, served, log = lab
    name, old, new = "00_quickstart.ipynb", "max_new_tokens = 48", "max_new_tokens = 5"
    source = served / "src" / "00_quickstart.py"
    assert old in source.read_text()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        _open_alone(page, url, token, name, log)
        edited = page.evaluate(
            """([old, neu]) => {
              const w = window.jupyterapp.shell.currentWidget;
              const cell = w.content.widgets.find(
                c => (c.model.getMetadata('tags') || []).includes('parameters'));
              const text = cell.model.sharedModel.getSource();
              cell.model.sharedModel.setSource(text.replace(old, neu));
              return cell.model.sharedModel.getSource();
            }""",
            [old, new],
        )
        assert new in edited
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        deadline = time.time() + 60
        while new not in source.read_text():
            assert time.time() < deadline, "saving in JupyterLab did not write src/00_quickstart.py"
            time.sleep(0.3)
    finally:
        if page.evaluate("() => !!window.jupyterapp"):
            page.evaluate("window.jupyterapp.serviceManager.sessions.shutdownAll()")
        page.close()
    env = {
        **os.environ,
        "WORKBENCH_RUNS": str(tmp_path / "runs"),
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
    }
    params = subprocess.run(
        [sys.executable, "-m", "workbench", "params", str(served / name)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert params.returncode == 0, params.stderr
    assert "max_new_tokens = 5 " in params.stdout, params.stdout
    run = subprocess.run(
        [sys.executable, "-m", "workbench", "run", str(served / name)]
        + ["-p", f"model={tiny_model_dir}", "--run-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    executed = json.loads((tmp_path / "out" / name).read_text())
    parameters = next(
        "".join(c["source"])
        for c in executed["cells"]
        if "parameters" in c.get("metadata", {}).get("tags", [])
    )
    assert new in parameters and old not in parameters
