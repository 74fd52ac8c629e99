"""Executing a notebook headless: papermill in the project's kernel (CurveZMQ-encrypted), the
repository root as working directory, the executed copy kept under the run's folder."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from workbench.notebooks.files import KERNEL_NAME, find_notebook, load_notebook
from workbench.notebooks.parameters import RUN_KINDS, validate_parameters
from workbench.paths import repo_root


def kernel_name() -> str:
    """The project's kernel when registered (the set-up does it), else the default python3."""
    from jupyter_client.kernelspec import KernelSpecManager

    return KERNEL_NAME if KERNEL_NAME in KernelSpecManager().find_kernel_specs() else "python3"


def without_debugger(name: str) -> Path:
    """Set ``"debugger": false`` in kernel ``name``'s spec (the set-up does it for the project's
    kernel) and return its ``kernel.json``. JupyterLab sends a kernel that declares a debugger
    debug requests on the control channel, and ipykernel publishes "idle" after each, so a
    long cell showed as idle (ipykernel issue 799); without it the status is busy until the
    cell ends. The JupyterLab debugger is not offered for this kernel."""

    from jupyter_client.kernelspec import KernelSpecManager

    from workbench.paths import write_text_atomic

    path = Path(KernelSpecManager().get_kernel_spec(name).resource_dir) / "kernel.json"
    spec = json.loads(path.read_text())
    spec.setdefault("metadata", {})["debugger"] = False
    write_text_atomic(path, json.dumps(spec, indent=1) + "\n")
    return path


def kernel_config():
    """Configuration for the kernel a notebook runs in: its messages encrypted with CurveZMQ
    keys that the kernel manager provisions, where the kernelspec declares support (ipykernel's
    since 7.4, so the project's) and pyzmq has it. ipykernel warns on every start of a kernel
    that runs over TCP unencrypted, as jupyter_client starts them by default."""
    import zmq
    from traitlets.config import Config

    policy = "auto" if zmq.has("curve") else "disabled"
    return Config({"KernelManager": {"transport_encryption": policy}})


def _kernel_manager_logging_to(log_path: Path):
    """nbclient's kernel manager, with the kernel's own stderr (its log: start-up warnings, a
    message handler's error while it is being shut down after Ctrl-C) in ``log_path`` instead of
    this terminal. What the cells print reaches the executed notebook (and ``--log-output``) as
    before."""
    from jupyter_client.manager import AsyncKernelManager

    class KernelManager(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd, **kw):
            with open(log_path, "ab") as log:  # the kernel keeps its own copy of the handle
                kw.setdefault("stderr", log)
                return await super()._async_launch_kernel(kernel_cmd, **kw)

    return KernelManager


#: Parameters that change where figures are copied, not what a run computes: setting them
#: does not make a run of its own.
PRESENTATION_ONLY = frozenset({"export_figures"})


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
            Parameters other than the defaults, with no ``run_name`` given, name a run of their
            own (``<run_name>-<8 hex digits of the parameters>``; ``<notebook>-<digits>.ipynb``
            in ``runs/notebooks``): the default run's outputs are never written over. A run
            under another name takes along the outputs whose defaults lie in the default run's
            folder (``runs/<default run_name>/...``, notebook 00's ``out_dir``).
        progress: show papermill's cell progress bar.
        log_output: stream what the cells print (the grid's progress lines, with an ETA) to
            this terminal while they run.
    """
    import papermill

    nb = find_notebook(name)
    parameters = dict(parameters or {})
    known = validate_parameters(nb, parameters)
    from workbench.paths import check_writable, run_folder, runs_root

    changed = {
        k: v for k, v in parameters.items() if v != known[k].default and k not in PRESENTATION_ONLY
    }
    suffix = ""
    if changed and not run_dir and "run_name" not in parameters:
        # a run with other parameters never writes over the default run's outputs
        import hashlib

        key = json.dumps(changed, sort_keys=True, default=str)
        suffix = "-" + hashlib.sha256(key.encode()).hexdigest()[:8]
        if "run_name" in known:
            parameters["run_name"] = f"{known['run_name'].default}{suffix}"
    if "run_name" in known and parameters.get("run_name", known["run_name"].default) != (
        default_run := known["run_name"].default
    ):
        # an output path inside the default run's folder (00's out_dir) moves with the run
        inside = f"runs/{default_run}/"
        for key, p in known.items():
            if (
                key not in parameters
                and isinstance(p.default, str)
                and p.default.startswith(inside)
            ):
                parameters[key] = f"runs/{parameters['run_name']}/{p.default[len(inside) :]}"
    if run_dir:
        out_dir = Path(run_dir)
    elif "run_name" in known:
        out_dir = run_folder(parameters.get("run_name", known["run_name"].default))
    else:
        out_dir = runs_root() / "notebooks"
    check_writable(out_dir, "the run folder")  # before the kernel starts
    from workbench.runlock import KIND_NAME, check_run_kind, claim_run

    kind = RUN_KINDS.get(nb.stem, "notebook")
    # a grid's folder is not notebook 11's, and the other way round; a folder named by run_dir
    # is the user's choice of place, a run name's is a run's
    check_run_kind(out_dir, kind, adopt=bool(run_dir))
    output = out_dir / (nb.name if "run_name" in known else f"{nb.stem}{suffix}.ipynb")
    if run_dir and not (out_dir / KIND_NAME).exists():  # the user's folder, not yet a run
        theirs = [p.name for p in (output, out_dir / f"{nb.stem}.input.ipynb") if p.exists()]
        if theirs:
            from workbench.errors import OutputError

            raise OutputError(
                f"run folder {out_dir} holds {theirs[0]}, which this run would replace, and is "
                "no workbench run; name another --run-dir (or move the file)"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    claim_run(out_dir, kind, adopt=bool(run_dir))
    if suffix and progress:
        print(f"parameters other than the defaults: this run's outputs go to {output}", flush=True)
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
    kernel_log = output.with_suffix(".kernel.log")
    try:
        papermill.execute_notebook(
            str(source),
            str(output),
            parameters=parameters,
            kernel_name=kernel_name(),
            cwd=str(repo_root()),
            progress_bar=progress and not log_output,
            log_output=log_output,
            config=kernel_config(),  # nbclient's, passed on to the kernel manager it creates
            kernel_manager_class=_kernel_manager_logging_to(kernel_log),
        )
    except papermill.PapermillExecutionError as e:  # the cell's traceback is in the output
        from workbench.errors import WorkbenchError

        what = (str(e.evalue).strip().splitlines() or [""])[0][:300]
        raise WorkbenchError(
            f"{nb.stem}: cell {e.exec_count} stopped with {e.ename}: {what} (the executed "
            f"notebook, with the whole traceback: {output})"
        ) from None
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (run_command): the kernel is already shut down
        from workbench.errors import Interrupted

        where = f"{out_dir} keeps the results written before" if out_dir.is_dir() else ""
        raise Interrupted(
            f"interrupted: {nb.stem} stopped{'; ' + where if where else ''}; the same command "
            "runs it again (a grid's finished cells are reused)"
        ) from None
    finally:
        if kernel_log.is_file() and not kernel_log.stat().st_size:
            kernel_log.unlink()  # a quiet kernel leaves no log behind
    return output
