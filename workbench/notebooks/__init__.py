"""Run the parameterized notebooks headless with papermill.

Each notebook ``notebooks/X.ipynb`` is paired by jupytext with ``notebooks/src/X.py``
(``jupytext.toml``): JupyterLab with the jupytext extension saves both, so there is one source.
The runner executes the pair only when both hold the same cells; a notebook edited without
jupytext (the pair out of step) is an error naming the command that syncs it, never a silent
choice of one file. Before the kernel starts, it rejects parameter names a notebook does not
define, values whose type differs from the default's (for a ``None`` default, from the grid's
field of the same name), values outside a parameter's choices (papermill itself only logs a
warning), models that cannot load and concepts the benchmark lacks, each in one line. It runs
in the project's Jupyter kernel (its messages CurveZMQ-encrypted) with the repository root as
working directory, and keeps the executed copy under ``runs/``.
"""

from workbench.notebooks.files import (
    KERNEL_NAME,
    NotebookParameter,
    find_notebook,
    load_notebook,
    notebook_parameters,
    notebooks_dir,
    paired_source,
)
from workbench.notebooks.parameters import (
    parameter_choices,
    parameter_type,
    parse_parameter,
    validate_parameters,
)
from workbench.notebooks.run import (
    PRESENTATION_ONLY,
    kernel_config,
    kernel_name,
    run_notebook,
    without_debugger,
)

__all__ = [
    "KERNEL_NAME",
    "PRESENTATION_ONLY",
    "NotebookParameter",
    "find_notebook",
    "kernel_config",
    "kernel_name",
    "load_notebook",
    "notebook_parameters",
    "notebooks_dir",
    "paired_source",
    "parameter_choices",
    "parameter_type",
    "parse_parameter",
    "run_notebook",
    "validate_parameters",
    "without_debugger",
]
