"""Where the workbench keeps things on disk."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

CACHE_ENV = "WORKBENCH_CACHE"


def cache_home() -> Path:
    """Root of the workbench's on-disk cache.

    ``$WORKBENCH_CACHE`` if set, else ``$XDG_CACHE_HOME/abstention-workbench``, else
    ``~/.cache/abstention-workbench``.
    """
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "abstention-workbench"


def repo_root() -> Path:
    """The checkout this package lives in (for notebooks, data and figures)."""
    return Path(__file__).resolve().parent.parent


RUNS_ENV = "WORKBENCH_RUNS"


def runs_root() -> Path:
    """Where runs write (``$WORKBENCH_RUNS``, else ``runs/`` in the checkout), whatever the
    working directory: JupyterLab (``notebooks/``) and papermill (the repository root) agree."""
    override = os.environ.get(RUNS_ENV)
    return Path(override).expanduser() if override else repo_root() / "runs"


#: The longest run name, in bytes (file systems allow 255 per name; a run's files add theirs).
MAX_RUN_NAME = 100


def check_run_name(name: object, field: str = "run_name") -> None:
    """A one-line ConfigError unless ``name`` is a plain directory name: not empty, no path
    separator, not hidden, no control character (a NUL failed at mkdir with a traceback, a
    newline made a folder no one could type), no space at either end (``" x"`` would be a
    second folder beside ``x``), at most :data:`MAX_RUN_NAME` bytes (a longer one failed at
    mkdir with a traceback)."""
    import unicodedata

    from workbench.errors import ConfigError

    text = name if isinstance(name, str) else ""
    if not text or any(c in text for c in "/\\") or text.startswith("."):
        raise ConfigError(f"{field} must be a plain directory name, got {name!r}")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text):
        raise ConfigError(f"{field} holds a control character: {name!r}")
    if text != text.strip():
        raise ConfigError(f"{field} begins or ends with a space: {name!r}")
    if len(text.encode()) > MAX_RUN_NAME:
        raise ConfigError(
            f"{field} is {len(text.encode())} bytes long; a run name may have at most "
            f"{MAX_RUN_NAME}"
        )


def run_folder(run_name: str) -> Path:
    """``runs/<run_name>/`` (not created); a run name that is not a plain directory name is a
    ConfigError."""
    check_run_name(run_name)
    return runs_root() / run_name


def run_path(run_name: str) -> Path:
    """``runs/<run_name>/``, created: every output of one run goes here."""
    path = run_folder(run_name)
    path.mkdir(parents=True, exist_ok=True)
    return path


def shown_path(path: str | os.PathLike) -> str:
    """``path`` as a person reads it in output: relative to the checkout when inside it
    (``runs/demo/figures/x.pdf``, the same on every machine and in the docs), else as given."""
    p = Path(path)
    try:
        return p.resolve().relative_to(repo_root()).as_posix()
    except ValueError:
        return str(p)


def project_path(path: str | os.PathLike) -> Path:
    """A path as given when absolute, else relative to the checkout (``data/unknown`` means the
    same file from a notebook in ``notebooks/`` as from the command line)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else repo_root() / p


def check_writable(path: str | os.PathLike, what: str = "the output folder") -> Path:
    """``path`` (a folder, existing or to be made), once proven writable: a probe file is made
    and removed in it, or in the nearest folder above it that exists; nothing else is created.
    Called before any work starts, so that a read-only folder, a path under a file or a full
    disk is one :class:`~workbench.errors.OutputError` line naming ``what`` and the folder, not
    an OSError traceback once the work is done."""
    from workbench.errors import OutputError

    p = Path(path).expanduser()
    existing = p.absolute()
    while not existing.exists() and existing.parent != existing:
        if existing.is_symlink():  # a link to nothing, or a loop of links: mkdir would fail
            raise OutputError(
                f"cannot write to {what} {p}: {existing} is a symbolic link that leads nowhere "
                "(its target is missing, or the links go round in a loop)"
            )
        existing = existing.parent
    if not existing.is_dir():
        raise OutputError(f"cannot write to {what} {p}: {existing} is a file, not a folder")
    try:
        probe = existing / f".write-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        probe.touch(exist_ok=False)
        probe.unlink()
    except OSError as e:
        where = "" if existing == p.absolute() else f" ({existing})"
        raise OutputError(
            f"cannot write to {what} {p}: {e.strerror or type(e).__name__}{where}"
        ) from None
    return p


def check_writable_file(
    path: str | os.PathLike,
    what: str = "the output file",
    inputs: Sequence[str | os.PathLike] = (),
    own: str | None = None,
) -> Path:
    """``path`` as a file that can be written (not a folder, its folder writable:
    :func:`check_writable`), checked before the work that fills it; never one of ``inputs``
    (files, or folders whose files the command reads): writing there would replace what
    the command reads. With ``own`` (how the files this command writes begin, e.g. a CSV
    header), a file already there is replaced only when it begins so: anything else there
    (a README, someone's notes) is the user's and stays."""
    from workbench.errors import ConfigError, OutputError

    p = Path(path).expanduser()
    if p.is_dir():
        raise OutputError(f"cannot write {what} {p}: it is a folder")
    if p.is_file():
        target = p.resolve()
        for source in inputs:
            s = Path(source).expanduser().resolve()
            if target == s or (s.is_dir() and s in target.parents):
                raise ConfigError(
                    f"{what} {p} is {'an input' if target == s else 'inside the input folder'} "
                    f"{Path(source)}: writing it would replace what this command reads; "
                    "choose another path"
                )
    if p.is_file() and own is not None:
        try:
            with open(p, "rb") as f:
                head = f.read(len(own.encode()))
        except OSError:
            head = b""
        if p.stat().st_size and head != own.encode():
            raise OutputError(
                f"{what} {p} is there and is not a table this command writes (it does not "
                f"begin {own!r}); remove it or choose another path"
            )
    check_writable(p.parent, f"the folder of {what}")
    return p


def check_folder_of(
    directory: str | os.PathLike,
    what: str,
    kind: str,
    ours: Callable[[dict], bool],
    manifest: str = "manifest.json",
) -> None:
    """One :class:`~workbench.errors.OutputError` line when ``directory`` holds files but not
    ``kind`` (its ``manifest`` file, parsed, does not pass ``ours``): writing ``kind`` there
    would replace a file of the same name (``manifest.json``) and mix its files into someone
    else's folder. A new or empty folder, or one that holds ``kind`` (rewritten in place),
    passes."""
    import json

    from workbench.errors import OutputError, some_of

    d = Path(directory)
    if not d.is_dir():
        return
    try:
        held = json.loads((d / manifest).read_text(encoding="utf-8"))
        if isinstance(held, dict) and ours(held):
            return
    except (OSError, ValueError):
        pass
    names = sorted(e.name for e in d.iterdir())
    if names:
        raise OutputError(
            f"{what} {d} holds other files ({some_of(names, 3)}) and no {kind}; name a new or "
            "empty folder "
            f"(the {kind}'s files would be written among them)"
        )


def _fsync(path: Path, directory: bool = False) -> None:
    """Flush ``path`` (a file, or a folder's entries) to the disk; where a system cannot sync
    a folder, nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    except OSError:
        if directory:
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_file(final: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling of ``final`` to write; on success it replaces ``final`` at
    once, on failure (an interrupt, a full disk) it is removed. Durable as databases make it:
    the data reaches the disk before the rename and the rename before returning (fsync of the
    file, then of its folder), so after a crash ``final`` is the old file or the new one, whole.
    The temporary name is this writer's own (process id and a random part): two writers never
    collide on it."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, final)
        _fsync(final.parent, directory=True)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all (:func:`atomic_file`)."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (:func:`atomic_file`)."""
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)


def jsonl_problem(path: str | os.PathLike) -> str | None:
    """Why a JSON Lines file of rows that a finished write left is damaged (empty, its last
    line cut, a line that is not a JSON object), or None when it is whole: what a crash before
    the durable writes of :func:`atomic_file` could leave, or a hand's edit."""
    import json

    data = Path(path).read_bytes()
    if not data:
        return "it is empty (0 bytes)"
    if not data.endswith(b"\n"):
        return "its last line is cut"
    for n, line in enumerate(data.splitlines(), 1):
        try:
            row = json.loads(line)
        except ValueError:
            return f"line {n} is not JSON"
        if not isinstance(row, dict):
            return f"line {n} is not a row (a JSON object)"
    return None


def parquet_problem(path: str | os.PathLike) -> str | None:
    """Why a Parquet file is damaged (empty, cut, not Parquet, an unreadable footer), or None
    when it is whole: what a crash before the durable writes of :func:`atomic_file` could
    leave."""
    import pyarrow.parquet as pq

    p = Path(path)
    size = p.stat().st_size
    if not size:
        return "it is empty (0 bytes)"
    with open(p, "rb") as f:
        head = f.read(4)
        f.seek(max(size - 4, 0))
        tail = f.read(4)
    if head != b"PAR1" or tail != b"PAR1":
        return "it is not a whole Parquet file (cut, or something else)"
    try:
        pq.read_metadata(p)
    except Exception as e:  # pyarrow's errors vary by version; the file is unusable either way
        return f"its footer cannot be read ({type(e).__name__})"
    return None


def whole_or_set_aside(
    path: str | os.PathLike, problem: Callable[[Path], str | None], then: str
) -> bool:
    """Whether ``path`` is there and whole by ``problem`` (:func:`jsonl_problem`,
    :func:`parquet_problem`). A damaged file is renamed to ``<name>.damaged``, with one warning
    line naming it and saying ``then`` (what happens instead), and counts as absent."""
    p = Path(path)
    if not p.is_file():
        return False
    why = problem(p)
    if why is None:
        return True
    aside = p.with_name(p.name + ".damaged")
    os.replace(p, aside)
    print(f"warning: {p} is damaged ({why}): moved to {aside.name}; {then}", file=sys.stderr)
    return False


@contextlib.contextmanager
def atomic_directory(final: Path) -> Iterator[Path]:
    """Yield a temporary sibling of ``final`` to write into; on success it is renamed to
    ``final`` (a concurrent writer that finished first keeps its copy), on failure removed: a
    reader never sees a half-written directory."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_utf8(path: str | os.PathLike) -> str:
    """The text of ``path``, or one ConfigError line naming the file and the first byte that
    is not UTF-8 (a config or labels file saved in another encoding)."""
    return decode_utf8(Path(path).read_bytes(), path)


def decode_utf8(data: bytes, path: str | os.PathLike, hint: str = "save it as UTF-8") -> str:
    """``data`` (read from ``path``) as text, or one ConfigError line naming the file, the first
    byte that is not UTF-8 and ``hint`` (what to do about it)."""
    from workbench.errors import ConfigError

    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); {hint}"
        ) from None
