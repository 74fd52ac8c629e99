"""A Jupyter server extension that keeps ``git status`` clean after JupyterLab saves a notebook.

Notebooks are stored without outputs (git's ``nbstrip`` clean filter, .gitattributes). Running one
and saving it writes its outputs into the ``.ipynb``: ``git diff`` is empty, but ``git status``
still lists the file, because git takes a changed size for a change without running the filter,
until something refreshes the index. After each save this extension's post-save hook rewrites the
file's index entry, the same blob with its recorded size cleared, when the file, as git would store
it, is the blob the index already holds; git then compares the filtered content. The outputs stay
in the file on disk, and nothing on disk is ever staged. The hook runs in the server as part of
the save (about 0.1-0.3 s: a few git calls and one run of the filter).

Enabled in the project's venv by ``scripts/setup.sh`` (``python -m workbench.lab_extension
--enable``: ``jupyter server extension enable`` refuses, in jupyter_server 2.21, an extension that
no config file names yet); ``python -m workbench.lab_extension FILE...`` refreshes by hand.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GIT_TIMEOUT_S = 10
EXTENSION = "workbench.lab_extension"  # this module, also when run as __main__


def _git(top: str | os.PathLike, *args: str) -> str:
    """``git args`` in ``top``; its stdout. Raises on failure or timeout; a git that runs past
    the timeout gets SIGTERM (not SIGKILL), so it removes any ``index.lock`` it holds."""
    proc = subprocess.Popen(
        ["git", "--literal-pathspecs", *args],
        cwd=top,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = proc.communicate(timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        raise
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, ["git", *args], out, err)
    return out


def _index_entry(top: str, rel: str) -> tuple[str, str] | None:
    """``(mode, blob)`` of ``rel`` in the index at stage 0; None if untracked, in conflict, or
    marked assume-unchanged / skip-worktree (git status does not look at those)."""
    out = _git(top, "ls-files", "-v", "--stage", "-z", "--", rel)
    entries = [e.split("\t", 1) for e in out.split("\0") if e]
    if len(entries) != 1 or entries[0][1] != rel:
        return None
    tag, mode, blob, stage = entries[0][0].split()
    return (mode, blob) if stage == "0" and tag == "H" else None


def refresh_index_entry(path: str | os.PathLike) -> bool:
    """Make ``git status`` stop listing ``path`` when, as git would store it (its clean filter
    applied), it is what the index holds.

    Acts only on a tracked file (stage 0) with a clean filter whose filtered content hashes to the
    index's blob, and then writes back that same blob (``update-index --cacheinfo``) with its
    recorded size cleared: git's size check no longer calls the file changed, and the next
    ``git status`` compares its filtered content instead. Nothing on disk is ever staged, so a
    change made meanwhile still shows. True when the entry was refreshed; any failure (no git, not
    a repository, the index locked) is False, never an exception.
    """
    try:
        path = Path(path).resolve()
        top = _git(path.parent, "rev-parse", "--show-toplevel").strip()
        rel = path.relative_to(Path(top).resolve()).as_posix()
        entry = _index_entry(top, rel)
        if entry is None or not path.is_file():
            return False
        attr = _git(top, "check-attr", "-z", "filter", "--", rel).split("\0")
        if len(attr) < 3 or attr[2] in ("unspecified", "unset", ""):
            return False
        mode, blob = entry
        if _git(top, "hash-object", f"--path={rel}", "--", rel).strip() != blob:
            return False  # a real change (or a filter that is not configured): leave it to git
        _git(top, "update-index", "--cacheinfo", f"{mode},{blob},{rel}")
        return True
    except Exception:
        return False


def post_save(model, os_path, contents_manager, **kwargs) -> None:
    """The contents manager's post-save hook: :func:`refresh_index_entry` on the saved file.

    Never raises: jupyter_server answers a save whose post-save hook raised with HTTP 500."""
    try:
        if refresh_index_entry(os_path):
            contents_manager.log.debug("workbench: git index refreshed for %s", os_path)
    except Exception:
        try:
            contents_manager.log.warning(
                "workbench: git index refresh failed for %s", os_path, exc_info=True
            )
        except Exception:
            pass


def _jupyter_server_extension_points():
    return [{"module": EXTENSION}]


def _load_jupyter_server_extension(serverapp):
    # Extensions load in alphabetical order: jupyterlab_jupytext, which replaces the server's
    # contents manager with its own, comes first, so the hook goes on the one that saves (a
    # subclass of jupyter_server's, which runs the post-save hooks for each file it writes).
    serverapp.contents_manager.register_post_save_hook(post_save)


def enable() -> Path:
    """Enable the extension for this environment's Jupyter server (what ``jupyter server extension
    enable --sys-prefix`` writes); the config file written."""
    from jupyter_core.paths import ENV_CONFIG_PATH
    from jupyter_server.extension.config import ExtensionConfigManager

    config_dir = Path(ENV_CONFIG_PATH[0])
    ExtensionConfigManager(
        read_config_path=[str(config_dir)],
        write_config_dir=str(config_dir / "jupyter_server_config.d"),
    ).enable(EXTENSION)
    return config_dir / "jupyter_server_config.d" / f"{EXTENSION}.json"


def main(argv: list[str] | None = None) -> int:
    """``--enable``: :func:`enable`; ``FILE...``: refresh the files' index entries (e.g. after
    restoring a run notebook)."""
    files = sys.argv[1:] if argv is None else argv
    if files == ["--enable"]:
        print(f"enabled: {enable()}")
        return 0
    if not files or any(f.startswith("-") for f in files):
        print("usage: python -m workbench.lab_extension --enable | FILE...", file=sys.stderr)
        return 2
    for f in files:
        print(f"{f}: {'refreshed' if refresh_index_entry(f) else 'left as it is'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
