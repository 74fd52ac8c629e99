"""The notebooks on disk: where they are, their jupytext pairs, and their ``parameters`` cell
read as typed defaults (no kernel starts)."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError
from workbench.paths import repo_root

KERNEL_NAME = "abstention-workbench"


def notebooks_dir() -> Path:
    return repo_root() / "notebooks"


def find_notebook(name: str | os.PathLike) -> Path:
    """Resolve ``01_select_abstention``, ``01_select_abstention.ipynb`` or a path."""
    path = Path(name)
    candidates = [path, notebooks_dir() / path, notebooks_dir() / f"{path}.ipynb"]
    for c in candidates:
        if c.is_file():
            return c.resolve()
    available = ", ".join(sorted(p.stem for p in notebooks_dir().glob("*.ipynb")))
    raise ConfigError(f"no notebook {str(name)!r}; available: {available}")


@dataclass(frozen=True)
class NotebookParameter:
    name: str
    default: Any
    inferred_type: str
    help: str


def paired_source(notebook: Path) -> Path:
    """The py:percent script paired with ``notebook`` (``src/<stem>.py`` beside it)."""
    return notebook.parent / "src" / f"{notebook.stem}.py"


def _cells(nb) -> list[tuple[str, str, tuple]]:
    return [
        (c.cell_type, c.source.strip(), tuple(c.get("metadata", {}).get("tags", [])))
        for c in nb.cells
    ]


def _read(path: Path):
    """A notebook or its script through jupytext; one that is empty, cut short or not a
    notebook is one ConfigError line naming it."""
    import jupytext

    try:
        return jupytext.read(str(path))
    except Exception as e:  # nbformat's and json's errors, a read error: all "cannot be read"
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise ConfigError(f"{path} cannot be read as a notebook ({first})") from None


def load_notebook(path: str | os.PathLike):
    """The notebook's cells (an nbformat node), read through jupytext from its pair.

    Raises ConfigError when the ``.ipynb`` and its ``src/*.py`` hold different cells.
    """

    nb_path = find_notebook(path)
    src = paired_source(nb_path)
    if not src.is_file():
        return _read(nb_path)
    text, ipynb = _read(src), _read(nb_path)
    if _cells(text) != _cells(ipynb):
        raise ConfigError(
            f"{nb_path.name} and src/{src.name} hold different cells (edited without jupytext?); "
            f"sync them with: jupytext --sync {nb_path} (the newer file wins)"
        )
    text.metadata.setdefault("kernelspec", ipynb.metadata.get("kernelspec", {}))
    return text


def notebook_parameters(path: str | os.PathLike) -> dict[str, NotebookParameter]:
    """The parameters a notebook's ``parameters`` cell defines, with their literal defaults and
    help text (a trailing ``# comment`` on the line).

    The cell is parsed with ``ast`` (papermill's own inspection reads ``#`` inside a string, as
    in composition ids ``a#b``, as the start of a comment).
    """
    import io
    import tokenize

    nb = find_notebook(path)
    cells = [
        c for c in load_notebook(nb).cells if "parameters" in c.get("metadata", {}).get("tags", [])
    ]
    if not cells:
        raise ConfigError(f"{nb.name} has no cell tagged 'parameters'")
    source = cells[0].source
    comments = {
        tok.start[0]: tok.string.lstrip("#").strip()
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    out = {}
    for node in ast.parse(source).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            name = node.targets[0].id
            assert node.end_lineno is not None  # ast.parse records every node's position
            try:
                default = ast.literal_eval(node.value)
            except ValueError:
                raise ConfigError(f"{nb.name}: parameter {name!r} is not a literal") from None
            out[name] = NotebookParameter(
                name, default, type(default).__name__, comments.get(node.end_lineno, "")
            )
    return out
