"""One writer per run folder at a time, and a second one told who holds it.

Two commands writing the same run at once (two ``import-select-results --run X``, a grid
started twice) would interleave their files. :func:`run_lock` takes ``<run>/.lock`` (an OS lock
through ``filelock``: released when its process ends, however it ends) and writes beside it who
holds it; a second writer fails at once with one :class:`RunLocked` line naming the command,
process, host and start time of the first.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from workbench.errors import OutputError, some_of
from workbench.paths import write_text_atomic

LOCK_NAME = ".lock"
HOLDER_NAME = ".lock.json"


class RunLocked(OutputError):
    """Another process is writing the run."""


class RunKindClash(OutputError):
    """The run folder holds another command's run."""


#: Which command's run a folder holds (``{"kind": "grid"}``), written by the first writer.
KIND_NAME = ".workbench-run.json"


def _legacy_kind(run_dir: Path) -> str | None:
    """What a folder written before the note existed holds: a grid's cells, or a refusal-eval
    config (its data sets and judge; other commands keep chunks too)."""
    if (run_dir / "cells").is_dir():
        return "grid"
    try:
        config = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if isinstance(config, dict) and {"datasets", "judge"} <= set(config):
        return "refusal-eval"
    return None


def run_kind(run_dir: str | os.PathLike) -> str | None:
    """The command whose run ``run_dir`` holds (``grid``, ``refusal-eval``, ...), None when
    it holds none yet."""
    run_dir = Path(run_dir)
    try:
        kind = json.loads((run_dir / KIND_NAME).read_text())["kind"]
        if isinstance(kind, str):
            return kind
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return _legacy_kind(run_dir)


def check_run_kind(run_dir: str | os.PathLike, kind: str, *, adopt: bool = False) -> None:
    """A one-line :class:`RunKindClash` when ``run_dir`` holds another command's run (the two
    would write over each other's ``config.json`` and tables) or, unless ``adopt`` (a folder
    the user named as the place to write), when it holds other files and no run at all (a
    data set's or a model's folder under the runs root)."""
    held = run_kind(run_dir)
    if held is not None and held != kind:
        raise RunKindClash(
            f"run {run_dir} holds a {held} run; give this {kind} run another name (both "
            "write config.json and their tables there)"
        )
    if held is None and not adopt:
        foreign = _foreign_files(Path(run_dir))
        if foreign:
            raise RunKindClash(
                f"run {run_dir} is a folder that holds no workbench run but other files "
                f"({some_of(foreign, 3)}); give this {kind} run another name or root (its "
                "files would be written among them)"
            )


#: What a run folder written before :data:`KIND_NAME` existed holds: a command's chunks or a
#: grid's cells, or a notebook's executed copy.
_RUN_MARKS = ("cells", "chunks")


def _foreign_files(run_dir: Path) -> list[str]:
    """The names in ``run_dir`` when it is a folder of something else (a data set, a model, a
    checkout): it holds files but neither a run's note nor the marks of an older run. Empty for
    a missing or empty folder and for a run's folder."""
    if not run_dir.is_dir() or (run_dir / KIND_NAME).exists():
        return []
    try:
        entries = sorted(run_dir.iterdir())
    except OSError:
        return []
    if any(e.name in _RUN_MARKS and e.is_dir() for e in entries) or any(
        e.suffix == ".ipynb" for e in entries
    ):
        return []
    return [e.name for e in entries if e.name not in (LOCK_NAME, HOLDER_NAME)]


def holder(run_dir: str | os.PathLike) -> str:
    """Who holds ``run_dir``'s lock, in words (from the holder's note beside it)."""
    try:
        info = json.loads((Path(run_dir) / HOLDER_NAME).read_text())
        return (
            f"{info['command']} (process {info['pid']} on {info['host']}, "
            f"started {info['started']})"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (it has not written who it is yet)"


def claim_run(run_dir: str | os.PathLike, kind: str, *, adopt: bool = False) -> None:
    """Note ``run_dir`` (which must exist) as ``kind``'s run, unless it is noted already:
    :class:`RunKindClash` as :func:`check_run_kind`."""
    run_dir = Path(run_dir)
    check_run_kind(run_dir, kind, adopt=adopt)
    if not (run_dir / KIND_NAME).is_file():
        write_text_atomic(run_dir / KIND_NAME, json.dumps({"kind": kind}))


@contextlib.contextmanager
def run_lock(run_dir: str | os.PathLike, command: str, kind: str | None = None) -> Iterator[None]:
    """Hold ``run_dir``'s lock while the block runs (the folder must exist and be writable:
    :func:`workbench.paths.check_writable`); raise :class:`RunLocked` at once when another
    process holds it. With ``kind`` (the command's name), the folder is that command's run:
    :class:`RunKindClash` when it holds another's, else noted as ``kind``'s."""
    from filelock import FileLock, Timeout

    run_dir = Path(run_dir)
    lock = FileLock(run_dir / LOCK_NAME, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RunLocked(
            f"run {run_dir} is in use by {holder(run_dir)}; wait for it to finish, or write "
            "another run"
        ) from None
    note = run_dir / HOLDER_NAME
    try:
        if kind is not None:
            claim_run(run_dir, kind)
        write_text_atomic(
            note,
            json.dumps(
                {
                    "command": command,
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                }
            ),
        )
        yield
    finally:
        note.unlink(missing_ok=True)
        lock.release()


def _holds_files(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a file other than its lock and the lock's note."""
    own = (LOCK_NAME, HOLDER_NAME, KIND_NAME)
    return any(p.is_file() and p.name not in own for p in run_dir.rglob("*"))


@contextlib.contextmanager
def new_run(run_dir: str | os.PathLike, command: str, kind: str | None = None) -> Iterator[Path]:
    """Make ``run_dir`` (if it is not there) and hold its lock while the block runs (``kind``:
    as :func:`run_lock`). A command that fails before it wrote a file leaves no folder
    behind, where it made the folder."""
    run_dir = Path(run_dir)
    if kind is not None and run_dir.is_dir():
        check_run_kind(run_dir, kind)
    made = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        with run_lock(run_dir, command, kind):
            yield run_dir
    except BaseException:
        if made and not _holds_files(run_dir):
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
