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

from __future__ import annotations

import ast
import json
import os
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import Field

from workbench.errors import ConfigError
from workbench.paths import repo_root
from workbench.settings import check_value

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


#: Parameters that name models (any name ``load_model`` accepts; "" or "self" where the
#: notebook reads them as "none" or "the model itself").
MODEL_PARAMETERS = ("model", "models", "judge_model")
#: What a notebook's run folder holds besides the notebook (the run its cells make there), by
#: notebook: a grid (its cells and tables) or the refusal suite's run; others hold a notebook's.
RUN_KINDS = {
    "01_select_abstention": "grid",
    "02_select_compositions": "grid",
    "03_refusal_judge": "grid",
    "07_label_answers": "grid",
    "06_refusal_suite": "refusal-eval",
}
#: Parameters whose items are texts a model answers: a blank one is a mistake.
TEXT_LISTS = ("questions",)
#: Parameters that name concepts of the benchmark.
CONCEPT_PARAMETERS = ("targets", "concept", "technique_target", "abstainer_target")
#: Notebooks whose concepts come from the benchmark a parameter names ("": the shipped one);
#: the others' come from the shipped benchmark.
BENCHMARK_PARAMETER = {"01_select_abstention": "data_dir", "02_select_compositions": "data_dir"}


def parameter_type(param: NotebookParameter) -> Any:
    """The type a parameter's values must have: its default's (a list takes a list or a tuple,
    of its items' type when they share one; a float an int), or for a ``None`` default the type of the grid's field of the same name
    (notebooks 01 and 02 pass them on to ExperimentConfig); anything when neither says."""
    import typing

    from workbench.experiments.config import ExperimentConfig

    default = param.default
    if default is None:
        declared = {**typing.get_type_hints(ExperimentConfig), "layer": int | None}
        return declared.get(param.name, Any)
    if isinstance(default, (list, tuple)):
        # a list of strings (questions, techniques, targets) takes strings only: [1, None]
        # once reached the model as a question
        kinds = {type(v) for v in default}
        if kinds and all(k in (str, int, float, bool) for k in kinds) and len(kinds) == 1:
            (kind,) = kinds
            return list[kind]  # type: ignore[valid-type]
        return list[Any]
    if isinstance(default, dict):
        return dict[Any, Any]
    return type(default)


#: The least value of each notebook parameter that counts something. A notebook's parameters are
#: literals with no declared bounds (a grid's fields declare theirs): what a negative or zero
#: count would break only after a model has loaded.
PARAMETER_MINIMUMS: dict[str, int] = {
    **dict.fromkeys(
        (
            "n_target",
            "n_descendant",
            "n_specificity",
            "n_unrelated",
            "n_constituent",
            "n_composition",
            "limit",
            "per_partition",
            "edits_per_group",
            "max_labelled",
            "n_questions",
            "seed",
            "seeds",
            "ray_workers",
            "min_path",
        ),
        0,
    ),
    **dict.fromkeys(
        (
            "max_new_tokens",
            "num_samples",
            "batch_size",
            "k_samples",
            "n_boot",
            "max_depth",
            "instances_per_leaf",
            "concepts_per_root",
            "composition_max_depth",
            "chunk_size",
            "rank",
            "alpha",
            "epochs",
            "dpo_epochs",
            "grad_accumulation",
            "max_length",
            "branching",
            "composition_branching",
        ),
        1,
    ),
}


def bounded(annotation: Any, least: int | None) -> Any:
    """``annotation`` with its integers (an integer's, a list's items, ``X | None``'s ``X``) held
    to at least ``least``."""
    if least is None:
        return annotation
    if annotation is int:
        return Annotated[int, Field(ge=least)]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, tuple) and args and args[0] is int:
        return list[Annotated[int, Field(ge=least)]]
    if origin in (Union, types.UnionType) and int in args:
        return Annotated[int, Field(ge=least)] | None
    return annotation


def _choices() -> dict[str, tuple]:
    """Enumerated values of parameters that several notebooks share (computed when asked, so
    that registries are complete)."""
    from workbench.editing.editors import EDITORS
    from workbench.editing.presets import EDITING_PRESETS
    from workbench.editing.scoring import NORMALIZATIONS
    from workbench.editing.taxi import SUBJECT_SPELLINGS
    from workbench.refusal.config import SAMPLING_PRESETS
    from workbench.scoring.detectors import DETECTOR_COLUMNS, detectors_for
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
        "editing_preset": tuple(EDITING_PRESETS),
        "subjects": (*SUBJECT_SPELLINGS, ""),
        "score_detector": tuple(detectors_for()),
        "normalization": NORMALIZATIONS,
        "executor": ("local", "ray"),
        "labels_split": ("test", "dev", "all"),
        "sampling": tuple(SAMPLING_PRESETS),
    }


def parameter_choices(name: str) -> tuple | None:
    """The allowed values of a notebook parameter called ``name`` (None: any value of its type)."""
    return _choices().get(name)


def validate_parameters(
    path: str | os.PathLike, parameters: dict[str, Any]
) -> dict[str, NotebookParameter]:
    """Fail fast, naming the parameter, on unknown names, wrongly typed values, values outside a
    parameter's enumerated choices (``detector``, ``preset``, ``techniques``, ...), models that
    cannot load and concepts the notebook's benchmark lacks. Returns the notebook's parameters."""
    known = notebook_parameters(path)
    name = Path(path).stem
    for key, value in parameters.items():
        if key not in known:
            raise ConfigError(
                f"notebook {name} has no parameter {key!r}; its parameters are: "
                + ", ".join(sorted(known))
            )
        annotation = bounded(parameter_type(known[key]), PARAMETER_MINIMUMS.get(key))
        check_value(value, annotation, key, label=f"notebook {name}: parameter")
        default = known[key].default
        if (
            isinstance(value, (list, tuple))
            and not value
            and isinstance(default, (list, tuple))
            and default
            and all(isinstance(v, str) for v in default)
        ):  # editors=[] once ran four cells, then failed with "No objects to concatenate"
            raise ConfigError(
                f"notebook {name}: parameter {key!r} is empty: name at least one "
                f"(its default: {', '.join(map(str, default))})"
            )
        if key in TEXT_LISTS:
            blank = next((i for i, v in enumerate(_values(value)) if not str(v).strip()), None)
            if blank is not None:
                raise ConfigError(f"notebook {name}: parameter '{key}[{blank}]' is blank")
        choices = parameter_choices(key)
        if choices is not None:
            values = value if isinstance(value, (list, tuple)) else [value]
            bad = [v for v in values if v not in choices]
            if bad:
                raise ConfigError(
                    f"notebook {name}: parameter {key!r} got {bad[0]!r}; "
                    f"choose from: {', '.join(map(str, choices))}"
                )
    _check_models(name, known, parameters)
    _check_concepts(name, known, parameters)
    _check_files(name, parameters)
    _check_inputs(name, known, parameters)
    _check_run(name, known, parameters)
    return known


#: Parameters naming a file the notebook reads (``labels_file`` may name one it will create).
INPUT_FILES = ("config_file", "taxi_file")


def _check_files(name: str, parameters: dict[str, Any]) -> None:
    """A file a parameter reads (:data:`INPUT_FILES`, relative to the checkout) is there: one
    line now, not a traceback from the kernel after a run folder was made."""
    from workbench.paths import project_path

    for key, value in parameters.items():
        if key in INPUT_FILES and isinstance(value, str) and value:
            path = project_path(value)
            if not path.is_file():
                what = "a folder" if path.is_dir() else "not there"
                raise ConfigError(f"notebook {name}: parameter {key!r}: {path} is {what}")


def _check_inputs(
    name: str, known: dict[str, NotebookParameter], parameters: dict[str, Any]
) -> None:
    """What a notebook reads only after its run (a release run, labelled answers, a run to
    label) and an edited layer are there, whatever their values: one line now, not from a
    cell after minutes of work."""
    from workbench.errors import WorkbenchError
    from workbench.paths import project_path, run_folder

    values = {key: parameters.get(key, p.default) for key, p in known.items()}

    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"notebook {name}: parameter {key!r}: {problem}")

    release = values.get("release_run")
    if isinstance(release, str) and release:
        try:
            results = run_folder(release) / "results.parquet"
        except ConfigError:
            raise fail(
                "release_run", f"{release!r} is not a run's name (a folder of runs/)"
            ) from None
        if not results.is_file():
            raise fail(
                "release_run",
                f"no run {release!r} with results ({results}; python -m workbench "
                "import-select-results writes one)",
            )
    prefix = values.get("figure_prefix")
    if (isinstance(prefix, str) and not re.fullmatch(r"[A-Za-z0-9_.-]+", prefix)) or prefix in (
        ".",
        "..",
    ):
        raise fail("figure_prefix", f"{prefix!r} is not a plain file-name prefix (no folders)")
    data_dir = values.get("data_dir")
    if (
        name == "04_unknown_concepts"
        and isinstance(data_dir, str)
        and data_dir
        and not project_path(data_dir).is_dir()
    ):
        raise fail("data_dir", f"{project_path(data_dir)} is not a folder")
    labels_dir = values.get("labels_dir")
    if isinstance(labels_dir, str) and labels_dir and not project_path(labels_dir).is_dir():
        raise fail("labels_dir", f"{project_path(labels_dir)} is not a folder")
    labels_file = values.get("labels_file")
    if isinstance(labels_file, str) and labels_file and project_path(labels_file).is_dir():
        raise fail("labels_file", f"{project_path(labels_file)} is a folder, not a file")
    run_dir = values.get("run_dir")
    if name == "07_label_answers" and isinstance(run_dir, str) and run_dir:
        from workbench.widgets.labelling.answers import answers_file, load_answers

        try:
            load_answers(project_path(run_dir))
        except WorkbenchError as e:
            raise fail("run_dir", str(e)) from None
        read = answers_file(project_path(run_dir)).resolve()
        labels = project_path(labels_file).resolve() if isinstance(labels_file, str) else None
        if labels_file and labels == read:  # the labels would be written into the answers
            raise fail("labels_file", f"{read} is the answers file run_dir reads")
    out_dir = values.get("out_dir")
    if name == "00_build_taxonomy" and isinstance(out_dir, str) and out_dir:
        _check_benchmark_out(project_path(out_dir), fail)
    taxi_file = values.get("taxi_file")
    if isinstance(taxi_file, str) and taxi_file:  # read whole now, as the notebook reads it
        from workbench.editing.data import load_taxi

        try:
            load_taxi(project_path(taxi_file))
        except WorkbenchError as e:
            raise fail("taxi_file", str(e)) from None
    layer, model = values.get("layer"), values.get("model")
    if isinstance(layer, int) and isinstance(model, str) and model:
        from workbench.backends import check_layer

        try:
            check_layer(model, layer)
        except WorkbenchError as e:
            raise fail("layer", str(e)) from None


def _check_benchmark_out(out: Path, fail: Any) -> None:
    """Notebook 00's ``out_dir``: a folder (or none yet) that holds no benchmark outside the
    runs folder: ``out_dir=data`` once replaced the shipped benchmark every command reads."""
    from workbench.paths import project_path, runs_root

    if out.exists() and not out.is_dir():
        raise fail("out_dir", f"{out} is a file, not a folder")
    held = [f for f in ("questions.jsonl", "manifest.json") if (out / f).is_file()]
    runs = (runs_root().resolve(), project_path("runs").resolve())
    inside_runs = any(out.resolve().is_relative_to(r) for r in runs)
    if held and not inside_runs:
        raise fail(
            "out_dir",
            f"{out} holds a benchmark ({held[0]}) the notebook would replace: name a new "
            "folder (python -m workbench taxonomy build rebuilds the shipped one)",
        )


def _values(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _preflight_grid(values: dict[str, Any]) -> None:
    """Notebooks 01 and 02: the grid their parameters make
    (:func:`workbench.experiments.notebook.notebook_run`), checked against its benchmark."""
    from workbench.experiments.notebook import notebook_run
    from workbench.paths import project_path
    from workbench.taxonomy import load_benchmark

    run = _call(notebook_run, values)
    if "executor" in values:  # the Ray options the grid cell passes on
        _call(run.executor_options, values)
    data_dir = values.get("data_dir")
    run.config.check_against(load_benchmark(project_path(data_dir) if data_dir else None))


def _preflight_suite(values: dict[str, Any]) -> None:
    """Notebook 06: the refusal suite its parameters (or its config file) make, prepared as
    the notebook prepares it (every data set read, models and abstainers checked)."""
    from workbench.refusal import RefusalSuite
    from workbench.refusal.notebook import notebook_config

    RefusalSuite(_call(notebook_config, values)).prepare()


def _call(fn: Callable[..., Any], values: dict[str, Any]) -> Any:
    import inspect

    return fn(**{k: v for k, v in values.items() if k in inspect.signature(fn).parameters})


#: Notebooks whose parameters make a run a function of the package makes too: it is made and
#: checked before the kernel starts, so its checks (an empty list, a technique's parameters, a
#: target the benchmark lacks, a data set that is not there) speak in one line, not from a cell.
PREFLIGHTS: dict[str, Callable[[dict[str, Any]], None]] = {
    "01_select_abstention": _preflight_grid,
    "02_select_compositions": _preflight_grid,
    "06_refusal_suite": _preflight_suite,
}


def _check_run(name: str, known: dict[str, NotebookParameter], parameters: dict[str, Any]) -> None:
    check = PREFLIGHTS.get(name)
    if check is None:
        return
    from workbench.errors import WorkbenchError

    try:
        check({key: parameters.get(key, p.default) for key, p in known.items()})
    except WorkbenchError as e:
        raise ConfigError(f"notebook {name}: {e}") from None


def _check_models(
    name: str, known: dict[str, NotebookParameter], parameters: dict[str, Any]
) -> None:
    """Models given as parameters can load (registered, a model directory, a hub id the cache
    or the hub has) and hold ``max_new_tokens`` new tokens: one line now, not a traceback from
    the kernel."""
    from workbench.backends import check_model, check_new_tokens
    from workbench.errors import WorkbenchError

    for key in MODEL_PARAMETERS:
        for model in _values(parameters.get(key, [])):
            if isinstance(model, str) and model not in ("", "self"):
                try:
                    check_model(model)
                except WorkbenchError as e:
                    raise ConfigError(f"notebook {name}: parameter {key!r}: {e}") from None
    new_tokens = parameters.get("max_new_tokens")
    if "max_new_tokens" not in known or not isinstance(new_tokens, int):
        return
    for key in ("model", "models"):  # the answering models; a judge answers in a few tokens
        if key in known:
            for model in _values(parameters.get(key, known[key].default)):
                if isinstance(model, str) and model:
                    check_new_tokens(
                        model, new_tokens, f"notebook {name}: parameter 'max_new_tokens'"
                    )


def _check_concepts(
    name: str, known: dict[str, NotebookParameter], parameters: dict[str, Any]
) -> None:
    """Concepts the notebook will look up are in its benchmark: those given, and with them
    the defaults when the benchmark itself is given (a WordNet default is not in a SELECT
    benchmark)."""
    bench_key = BENCHMARK_PARAMETER.get(name)
    keys = [k for k in CONCEPT_PARAMETERS if k in known]
    if not keys or not (set(keys) | {bench_key}) & set(parameters):
        return
    from workbench.errors import WorkbenchError
    from workbench.paths import project_path
    from workbench.taxonomy import load_benchmark

    directory = parameters.get(bench_key, known[bench_key].default) if bench_key else ""
    try:
        bench = load_benchmark(project_path(directory) if directory else None)
    except WorkbenchError as e:
        raise ConfigError(f"notebook {name}: parameter {bench_key!r}: {e}") from None
    for key in keys:
        for concept in _values(parameters.get(key, known[key].default)):
            try:
                bench.concept(concept)
            except WorkbenchError as e:
                raise ConfigError(
                    f"notebook {name}: parameter {key!r}: {e} (find ids: python -m "
                    "workbench taxonomy find TEXT)"
                ) from None


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
