"""Run the parameterized notebooks headless with papermill.

One runner for all of them: it rejects parameter names a notebook does not define and values
whose type differs from the default (papermill itself only logs a warning), runs in the
project's Jupyter kernel with the repository root as working directory, and keeps the executed
copy under ``runs/<run>/``.
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


def notebook_parameters(path: str | os.PathLike) -> dict[str, NotebookParameter]:
    """The parameters a notebook's ``parameters`` cell defines, with their literal defaults.

    The cell is parsed with ``ast`` (papermill's own inspection reads ``#`` inside a string, as
    in composition ids ``a#b``, as the start of a comment).
    """
    import nbformat

    nb = find_notebook(path)
    cells = [c for c in nbformat.read(str(nb), as_version=4).cells
             if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not cells:
        raise ConfigError(f"{nb.name} has no cell tagged 'parameters'")
    out = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            try:
                default = ast.literal_eval(node.value)
            except ValueError:
                raise ConfigError(f"{nb.name}: parameter {name!r} is not a literal") from None
            out[name] = NotebookParameter(name, default, type(default).__name__, "")
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

    return {"detector": DETECTOR_COLUMNS, "preset": tuple(PRESETS), "prompts": tuple(PROMPTS),
            "techniques": tuple(TECHNIQUES), "technique": tuple(TECHNIQUES),
            "editors": tuple(EDITORS), "normalization": NORMALIZATIONS, "executor": ("local", "ray")}


def parameter_choices(name: str) -> tuple | None:
    """The allowed values of a notebook parameter called ``name`` (None: any value of its type)."""
    return _choices().get(name)


def validate_parameters(path: str | os.PathLike, parameters: dict[str, Any]) -> None:
    """Fail fast, naming the parameter, on unknown names, wrongly typed values and values
    outside a parameter's enumerated choices (``detector``, ``preset``, ``techniques``, ...)."""
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
                raise ConfigError(f"notebook {name}: parameter {key!r} got {bad[0]!r}; "
                                  f"choose from: {', '.join(map(str, choices))}")


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
) -> Path:
    """Execute a notebook with papermill and return the path of the executed copy.

    Args:
        name: notebook stem (``01_select_abstention``), file name or path.
        parameters: overrides for the notebook's ``parameters`` cell.
        run_dir: where the executed copy goes (default ``runs/notebooks``).
        progress: show papermill's cell progress bar.
    """
    import papermill

    nb = find_notebook(name)
    parameters = dict(parameters or {})
    validate_parameters(nb, parameters)
    out_dir = Path(run_dir) if run_dir else repo_root() / "runs" / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / nb.name
    papermill.execute_notebook(
        str(nb), str(output), parameters=parameters, kernel_name=kernel_name(),
        cwd=str(repo_root()), progress_bar=progress,
    )
    return output
