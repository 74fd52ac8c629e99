"""A notebook run's parameters checked before the kernel starts: names the notebook defines,
values of the defaults' types and bounds, enumerated choices, models that load, concepts the
benchmark has and input files that are there, each fault one line."""

from __future__ import annotations

import ast
import os
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import Field

from workbench.errors import ConfigError
from workbench.notebooks.files import NotebookParameter, notebook_parameters
from workbench.settings import check_value

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
