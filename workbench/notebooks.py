"""Run the parameterized notebooks headless with papermill.

Each notebook ``notebooks/X.ipynb`` is paired by jupytext with ``notebooks/src/X.py``
(``jupytext.toml``): JupyterLab with the jupytext extension saves both, so there is one source.
The runner executes the pair only when both hold the same cells; a notebook edited without
jupytext (the pair out of step) is an error naming the command that syncs it, never a silent
choice of one file. It rejects parameter names a notebook does not define, values whose type
differs from the default and values outside a parameter's choices (papermill itself only logs a
warning), runs in the project's Jupyter kernel with the repository root as working directory,
and keeps the executed copy under ``runs/``.
"""

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


def load_notebook(path: str | os.PathLike):
    """The notebook's cells (an nbformat node), read through jupytext from its pair.

    Raises ConfigError when the ``.ipynb`` and its ``src/*.py`` hold different cells.
    """
    import jupytext

    nb_path = find_notebook(path)
    src = paired_source(nb_path)
    if not src.is_file():
        return jupytext.read(str(nb_path))
    text, ipynb = jupytext.read(str(src)), jupytext.read(str(nb_path))
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


def _compatible(default: Any, value: Any) -> bool:
    if default is None or value is None:
        return True
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, (int, float)) and isinstance(value, (int, float)):
        return not (isinstance(default, int) and isinstance(value, float))
    if isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)):
        return True
    return isinstance(value, type(default))


def _choices() -> dict[str, tuple]:
    """Enumerated values of parameters that several notebooks share (computed when asked, so
    that registries are complete)."""
    from workbench.editing.editors import EDITORS
    from workbench.editing.scoring import NORMALIZATIONS
    from workbench.scoring.detectors import DETECTOR_COLUMNS
    from workbench.techniques import TECHNIQUES
    from workbench.techniques.presets import PRESETS
    from workbench.unknown.measures import PROMPTS

    # an empty detector or aggregate means "the preset's" (notebooks 01 and 02)
    return {
        "detector": DETECTOR_COLUMNS + ("",),
        "aggregate": ("bootstrap", "select", ""),
        "preset": tuple(PRESETS),
        "prompts": tuple(PROMPTS),
        "techniques": tuple(TECHNIQUES),
        "technique": tuple(TECHNIQUES),
        "editors": tuple(EDITORS),
        "normalization": NORMALIZATIONS,
        "executor": ("local", "ray"),
    }


def parameter_choices(name: str) -> tuple | None:
    """The allowed values of a notebook parameter called ``name`` (None: any value of its type)."""
    return _choices().get(name)


def validate_parameters(
    path: str | os.PathLike, parameters: dict[str, Any]
) -> dict[str, NotebookParameter]:
    """Fail fast, naming the parameter, on unknown names, wrongly typed values and values
    outside a parameter's enumerated choices (``detector``, ``preset``, ``techniques``, ...).
    Returns the notebook's parameters."""
    known = notebook_parameters(path)
    name = Path(path).stem
    for key, value in parameters.items():
        if key not in known:
            raise ConfigError(
                f"notebook {name} has no parameter {key!r}; its parameters are: "
                + ", ".join(sorted(known))
            )
        default = known[key].default
        if not _compatible(default, value):
            raise ConfigError(
                f"notebook {name}: parameter {key!r} expects {type(default).__name__} "
                f"(default {default!r}), got {type(value).__name__} {value!r}"
            )
        choices = parameter_choices(key)
        if choices is not None:
            values = value if isinstance(value, (list, tuple)) else [value]
            bad = [v for v in values if v not in choices]
            if bad:
                raise ConfigError(
                    f"notebook {name}: parameter {key!r} got {bad[0]!r}; "
                    f"choose from: {', '.join(map(str, choices))}"
                )
    return known


def parse_parameter(text: str) -> tuple[str, Any]:
    """``key=value`` from the command line; the value is a Python literal or a bare string."""
    if "=" not in text:
        raise ConfigError(f"parameter {text!r} must look like key=value")
    key, raw = text.split("=", 1)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return key.strip(), value


def kernel_name() -> str:
    """The project's kernel when registered (the set-up does it), else the default python3."""
    from jupyter_client.kernelspec import KernelSpecManager

    return KERNEL_NAME if KERNEL_NAME in KernelSpecManager().find_kernel_specs() else "python3"


def run_notebook(
    name: str | os.PathLike,
    parameters: dict[str, Any] | None = None,
    *,
    run_dir: str | os.PathLike | None = None,
    progress: bool = True,
    log_output: bool = False,
) -> Path:
    """Execute a notebook with papermill and return the path of the executed copy.

    Args:
        name: notebook stem (``01_select_abstention``), file name or path.
        parameters: overrides for the notebook's ``parameters`` cell.
        run_dir: where the executed copy goes (default: the run's own folder
            ``runs/<run_name>/`` for notebooks with a ``run_name``, else ``runs/notebooks``).
        progress: show papermill's cell progress bar.
        log_output: stream what the cells print (the grid's progress lines, with an ETA) to
            this terminal while they run.
    """
    import papermill

    nb = find_notebook(name)
    parameters = dict(parameters or {})
    known = validate_parameters(nb, parameters)
    if run_dir:
        out_dir = Path(run_dir)
    elif "run_name" in known:
        from workbench.paths import run_path

        out_dir = run_path(parameters.get("run_name", known["run_name"].default))
    else:
        from workbench.paths import runs_root

        out_dir = runs_root() / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / nb.name
    source = out_dir / f"{nb.stem}.input.ipynb"
    import nbformat

    nbformat.write(load_notebook(nb), str(source))
    if log_output:
        import logging
        import sys

        logger = logging.getLogger("papermill")
        if not logger.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(message)s"))
            logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    papermill.execute_notebook(
        str(source),
        str(output),
        parameters=parameters,
        kernel_name=kernel_name(),
        cwd=str(repo_root()),
        progress_bar=progress and not log_output,
        log_output=log_output,
    )
    return output
