"""Running a notebook (outputs saved into the .ipynb, as JupyterLab does) changes nothing git
would commit: the clean filter (.gitattributes, configured by scripts/setup.sh) strips outputs.

git alone would still list such a file in ``git status`` (its size changed, and git does not run
filters for that check) until the index is refreshed; ``git diff`` is empty and ``git add`` stages
nothing. The workbench's Jupyter server extension (``workbench.lab_extension``, enabled by
scripts/setup.sh) refreshes the index entry after each save when the stripped notebook is the
committed one, so ``git status`` stays clean while the outputs stay in the file on disk."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from workbench.lab_extension import refresh_index_entry

ROOT = Path(__file__).resolve().parents[1]


def test_stored_notebooks_are_already_stripped():
    sys.path.insert(0, str(ROOT / "scripts"))
    from nbstrip import strip

    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert strip(nb.read_text()) == nb.read_text(), nb.name


def test_stored_language_info_is_the_project_kernels():
    """JupyterLab copies the kernel's language_info into a notebook it opens: stored as the
    kernel reports it in the reference environment (the Python docs/results/demo.json was
    measured with), a notebook opens unmodified there (tests/test_browser_first_run.py)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from ipykernel.ipkernel import IPythonKernel

    from nbstrip import LANGUAGE_INFO, strip

    reference = json.loads((ROOT / "docs" / "results" / "demo.json").read_text())
    assert LANGUAGE_INFO["version"] == reference["machine"]["versions"]["python"]
    assert {**IPythonKernel.language_info, "version": LANGUAGE_INFO["version"]} == LANGUAGE_INFO
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert json.loads(strip(nb.read_text()))["metadata"]["language_info"] == LANGUAGE_INFO
    # whichever Python saved it, the stored form is the same; another kernel's is kept
    saved = json.loads((ROOT / NB).read_text())
    saved["metadata"]["language_info"] = {**LANGUAGE_INFO, "version": "3.12.1"}
    assert json.loads(strip(json.dumps(saved)))["metadata"]["language_info"] == LANGUAGE_INFO
    saved["metadata"]["kernelspec"] = {"name": "ir", "language": "R", "display_name": "R"}
    saved["metadata"]["language_info"] = {"name": "R", "version": "4.3.1"}
    assert json.loads(strip(json.dumps(saved)))["metadata"]["language_info"] == {
        "name": "R",
        "version": "4.3.1",
    }


NB = "notebooks/10_steering_inspector.ipynb"


def _git(repo, *args) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def repo(tmp_path):
    """A git repository holding notebook 10 as committed, with the filter set up as a clone's."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "scripts" / "nbstrip.py", tmp_path / "scripts")
    shutil.copy(ROOT / ".gitattributes", tmp_path)
    shutil.copy(ROOT / ".gitignore", tmp_path)  # .ipynb_checkpoints/, which Jupyter's saves make
    shutil.copy(ROOT / NB, tmp_path / NB)
    (tmp_path / "notes.txt").write_text("no filter here\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.com")
    _git(tmp_path, "config", "user.name", "t")
    # what scripts/setup.sh configures in a clone
    _git(tmp_path, "config", "filter.nbstrip.clean", f"{sys.executable} scripts/nbstrip.py")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "init")
    return tmp_path


def _run(nb: dict) -> dict:
    """``nb`` as JupyterLab saves it after running it: outputs, execution counts, language info."""
    nb = json.loads(json.dumps(nb))
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = i + 1
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ran\n"]}]
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.7"}
    return nb


def _edited(nb: dict) -> dict:
    nb = json.loads(json.dumps(nb))
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code")
    cell["source"] = "# an edit\n" + "".join(
        cell["source"]
    )  # a list on disk, a str in Jupyter's model
    return nb


def test_a_run_notebook_leaves_git_status_clean(repo):
    nb = repo / NB
    data = _run(json.loads(nb.read_text()))
    nb.write_text(json.dumps(data, indent=1))
    assert _git(repo, "diff") == ""
    assert _git(repo, "status", "--porcelain") == f" M {NB}\n"  # git alone: its size check
    assert refresh_index_entry(nb)
    assert _git(repo, "status", "--porcelain") == "" and _git(repo, "diff", "--cached") == ""
    assert json.loads(nb.read_text()) == data  # the outputs stay on disk
    nb.write_text(json.dumps(_edited(data), indent=1))
    assert not refresh_index_entry(nb)  # a real change: never staged
    assert (
        _git(repo, "status", "--porcelain") == f" M {NB}\n" and _git(repo, "diff", "--cached") == ""
    )
    _git(repo, "add", "-A")  # what git add would commit: the edit, not the outputs
    assert _git(repo, "status", "--porcelain") == f"M  {NB}\n"
    assert '"outputs": []' in _git(repo, "show", f":{NB}") and "ran" not in _git(
        repo, "show", f":{NB}"
    )


def test_a_change_made_during_the_refresh_is_never_staged(repo, monkeypatch):
    from workbench import lab_extension

    nb = repo / NB
    data = _run(json.loads(nb.read_text()))
    nb.write_text(json.dumps(data, indent=1))
    git = lab_extension._git
    lock = {"held": False}

    def racing(top, *args):  # the file is edited after the check, before the index is written
        if args[:2] == ("update-index", "--cacheinfo"):
            nb.write_text(json.dumps(_edited(data), indent=1))
            if lock["held"]:  # and another git holds the index then
                (repo / ".git" / "index.lock").write_text("")
        return git(top, *args)

    monkeypatch.setattr(lab_extension, "_git", racing)
    refresh_index_entry(nb)
    assert _git(repo, "diff", "--cached") == ""  # the index holds the committed notebook
    assert _git(repo, "status", "--porcelain") == f" M {NB}\n"  # and git sees the edit
    _git(repo, "checkout", "--", NB)
    nb.write_text(json.dumps(data, indent=1))
    lock["held"] = True
    assert not refresh_index_entry(nb)
    (repo / ".git" / "index.lock").unlink()
    assert _git(repo, "diff", "--cached") == ""
    assert _git(repo, "status", "--porcelain") == f" M {NB}\n"


def test_odd_names_and_entries_git_status_ignores(repo):
    spaced = repo / "notebooks" / "my run [1].ipynb"  # spaces and glob characters
    spaced.write_text((repo / NB).read_text())
    _git(repo, "add", "--", str(spaced.relative_to(repo)))
    _git(repo, "commit", "-qm", "a second notebook")
    spaced.write_text(json.dumps(_run(json.loads(spaced.read_text())), indent=1))
    assert refresh_index_entry(spaced)
    assert _git(repo, "status", "--porcelain") == ""
    _git(repo, "update-index", "--assume-unchanged", NB)  # the user asked git not to look
    (repo / NB).write_text(json.dumps(_run(json.loads((repo / NB).read_text())), indent=1))
    assert not refresh_index_entry(repo / NB)
    assert _git(repo, "ls-files", "-v", NB).startswith("h ")  # the flag kept


def test_refresh_leaves_other_files_alone(repo, tmp_path_factory):
    notes = repo / "notes.txt"
    notes.write_text("no filter here, a longer line\n")  # tracked, no clean filter
    assert not refresh_index_entry(notes)
    untracked = repo / "notebooks" / "new.ipynb"  # the filter applies, but git does not track it
    untracked.write_text((repo / NB).read_text())
    assert not refresh_index_entry(untracked)
    assert _git(repo, "status", "--porcelain").splitlines() == [
        " M notes.txt",
        "?? notebooks/new.ipynb",
    ]
    outside = tmp_path_factory.mktemp("no_repo") / "x.ipynb"  # in no repository
    outside.write_text("{}")
    assert not refresh_index_entry(outside)
    assert not refresh_index_entry(repo / "notebooks" / "missing.ipynb")
    (repo / ".git" / "index.lock").write_text("")  # another git holds the index
    (repo / NB).write_text(json.dumps(_run(json.loads((repo / NB).read_text())), indent=1))
    assert not refresh_index_entry(repo / NB)


def test_a_save_through_jupyter_leaves_git_status_clean(repo):
    """The extension as jupyter_server loads it: its hook runs after a contents-manager save."""
    from jupyter_server.services.contents.filemanager import FileContentsManager

    from workbench import lab_extension

    serverapp = SimpleNamespace(contents_manager=FileContentsManager(root_dir=str(repo)))
    assert lab_extension._jupyter_server_extension_points() == [
        {"module": "workbench.lab_extension"}
    ]
    lab_extension._load_jupyter_server_extension(serverapp)
    cm = serverapp.contents_manager
    assert lab_extension.post_save in cm._post_save_hooks
    model = cm.get(NB)
    model["content"] = nbformat.from_dict(_run(model["content"]))
    cm.save(model, NB)
    assert any(c.get("outputs") for c in json.loads((repo / NB).read_text())["cells"])
    assert _git(repo, "status", "--porcelain") == "" and _git(repo, "diff", "--cached") == ""
    model["content"] = nbformat.from_dict(_edited(model["content"]))
    cm.save(model, NB)
    assert _git(repo, "status", "--porcelain") == f" M {NB}\n"


def test_a_failing_refresh_never_fails_the_save(monkeypatch):
    from workbench import lab_extension

    def broken(path):
        raise RuntimeError("boom")

    logged = []
    monkeypatch.setattr(lab_extension, "refresh_index_entry", broken)
    log = SimpleNamespace(debug=lambda *a, **k: None, warning=lambda *a, **k: logged.append(a))
    lab_extension.post_save(
        model={}, os_path="/nowhere.ipynb", contents_manager=SimpleNamespace(log=log)
    )
    assert logged and "/nowhere.ipynb" in logged[0]


VENV_CONFIG = (
    Path(sys.prefix)
    / "etc"
    / "jupyter"
    / "jupyter_server_config.d"
    / "workbench.lab_extension.json"
)
needs_venv_config = pytest.mark.skipif(
    not VENV_CONFIG.exists(),
    reason=f"{VENV_CONFIG} is absent: this environment was not made by scripts/setup.sh (make setup)",
)


@needs_venv_config
def test_the_extension_is_enabled_in_the_venv():
    out = subprocess.run(
        [sys.executable, "-m", "jupyter", "server", "extension", "list"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    assert re.search(r"workbench\.lab_extension\s+enabled", text), text
    assert re.search(r"workbench\.lab_extension\s+OK", text), text


@needs_venv_config
def test_the_hook_is_on_the_contents_manager_jupyterlab_uses(tmp_path):
    """In the server as ``jupyter lab`` configures it, where jupytext's extension replaces the
    contents manager with its own: the hook is on the one that saves."""
    code = """if True:
        import sys
        from jupyter_server.serverapp import ServerApp
        app = ServerApp()
        app.initialize(argv=["--port=0", "--ServerApp.open_browser=False", "--ServerApp.log_level=ERROR",
                             f"--ServerApp.root_dir={sys.argv[1]}"])
        cm = app.web_app.settings["contents_manager"]
        print(type(cm).__name__, [f"{h.__module__}.{h.__name__}" for h in cm._post_save_hooks])
    """
    env = {
        **os.environ,
        **{
            k: str(tmp_path / k)
            for k in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR")
        },
    }
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "workbench.lab_extension.post_save" in out.stdout, out.stdout + out.stderr[-3000:]
