"""Settings are checked before any work starts, everywhere: each bad input or fault a new user
meets is one ``error: ...`` line naming the problem, exit status 2, and nothing half written.

Commands run in process (``main(argv)``, the command line less the interpreter) where the check
comes before anything loads; a few run as subprocesses where the process itself is under test
(a signal, two imports at once).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import pytest

from workbench.errors import ConfigError
from workbench.settings import check_value


def one_error_line(capsys, status: int) -> str:
    """The command's one stderr line (asserting exit status 2 and that it is the only one)."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def the_error_after_progress(capsys, status: int) -> str:
    """The one ``error:`` line of a command whose progress bars also write to stderr (a grid
    that ran a cell): no traceback, and nothing after the error."""
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    return errors[0]


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment of a command under test: this checkout's package first on the path."""
    import os

    from workbench.paths import repo_root

    path = os.pathsep.join(filter(None, [str(repo_root()), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", **extra}


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []


# -- one typed-field checker ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, annotation, problem",
    [
        ("no", bool, "'f' must be true or false, got 'no' (str)"),
        (1, bool, "'f' must be true or false, got 1 (int)"),
        (True, int, "'f' must be an integer, got True (bool)"),
        (2.5, int, "'f' must be an integer, got 2.5 (float)"),
        ("4", int | None, "'f' must be an integer, got '4' (str)"),
        ("0.7", float, "'f' must be a number, got '0.7' (str)"),
        (["a", 3], tuple[str, ...], "'f[1]' must be a string, got 3 (int)"),
        ("a", tuple[str, ...], "'f' must be a list of strings, got 'a' (str)"),
        ({"s": [0, "1"]}, dict[str, tuple[int, ...]] | None, "'f.s[1]' must be an integer"),
        ({"m": 3}, dict[str, dict[str, Any]], "'f.m' must be a mapping, got 3 (int)"),
        ([1], dict[str, tuple[int, ...]], "'f' must be a mapping to lists of integers, got [1]"),
        ("c", Literal["a", "b"], "'f' must be one of 'a', 'b', got 'c' (str)"),
    ],
)
def test_a_value_of_the_wrong_type_is_named_with_what_it_got(value, annotation, problem):
    with pytest.raises(ConfigError) as e:
        check_value(value, annotation, "f")
    assert str(e.value).startswith("config field " + problem)


@pytest.mark.parametrize(
    "value, annotation",
    [
        (True, bool | None),
        (None, bool | None),
        (3, float),  # a float takes an int (YAML's 1 for 1.0)
        ([0, 1], tuple[int, ...]),  # YAML has lists only
        ((0, 1), list[int]),
        ({"a": {"b": 1}}, dict[str, dict[str, Any]]),
        ("b", Literal["a", "b"]),
        (object(), Any),
    ],
)
def test_values_of_the_right_type_pass(value, annotation):
    check_value(value, annotation, "f")


def test_grid_do_sample_as_text_is_an_error_not_sampling(tmp_path, capsys):
    from workbench.cli import main

    cfg = tmp_path / "grid.yaml"
    cfg.write_text('name: typed\ntechniques: [base]\ndo_sample: "no"\n')
    line = one_error_line(capsys, main(["grid", str(cfg), "--root", str(tmp_path / "runs")]))
    assert line == "error: config field 'do_sample' must be true or false, got 'no' (str)"
    assert not (tmp_path / "runs").exists()


def test_an_endpoint_time_budget_stops_sending_and_the_grid_with_it(tmp_path, capsys, monkeypatch):
    """``budget``: the endpoint's seconds in all. Past them no request is sent (a slow endpoint
    once held a grid for as long as its cells had requests), and the grid stops at its next
    cell on it, the finished cells kept."""
    from workbench.backends import load_model
    from workbench.backends.openai_api import BudgetSpent
    from workbench.cli import main
    from workbench.generation import GenerationConfig, generate

    seen: list = []
    server, url = _serve_json(200, ANSWER, seen, delay=0.3)
    try:
        options = {"cache": False, "max_retries": 0, "concurrency": 1, "budget": 1.0}
        lm = load_model(f"openai:served@{url}", options=options)
        with pytest.raises(BudgetSpent, match=rf"^endpoint {url} used its time budget \(1 s, "):
            generate(lm, [f"Question {i}?" for i in range(12)], GenerationConfig(max_new_tokens=4))
        assert 3 <= len(seen) <= 5  # about a second of 0.3 s answers, not twelve
        lm.close()

        monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
        seen.clear()
        capsys.readouterr()
        cfg = tmp_path / "grid.yaml"
        cfg.write_text(
            f"name: budget\nmodels: ['openai:served@{url}']\ntechniques: [base, zero_shot]\n"
            "targets: ['wn:09411430-n', 'wn:10560637-n']\nn_target: 2\nn_descendant: 0\n"
            f"n_specificity: 0\nn_unrelated: 0\nmodel_options: {{'openai:served@{url}': "
            "{budget: 1.5, max_retries: 0, concurrency: 1}}\n"
        )
        line = the_error_after_progress(capsys, main(["grid", str(cfg), "--root", str(tmp_path)]))
        m = re.fullmatch(
            rf"error: endpoint {re.escape(url)} used its time budget \(1.5 s, option 'budget'\) "
            r"after \d+ requests; their answers are cached; the grid stopped at its first cell "
            r"on it \((\d) of 4 cells done and kept; run it again to go on\)",
            line,
        )
        assert m, line
        kept = len(list((tmp_path / "budget" / "cells").glob("*.jsonl")))
        assert kept == int(m.group(1)) < 4 and len(seen) <= 6  # 1.5 s of 0.3 s answers
    finally:
        server.shutdown()
        server.server_close()


def test_a_grid_time_budget_stops_after_a_cell_and_the_same_grid_goes_on(
    tmp_path, capsys, monkeypatch
):
    from workbench.cli import main

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    server, url = _serve_json(200, ANSWER, [])
    try:
        cfg = tmp_path / "grid.yaml"
        cfg.write_text(
            f"name: timed\nmodels: ['openai:served@{url}']\ntechniques: [base, zero_shot]\n"
            "targets: ['wn:09411430-n', 'wn:10560637-n']\nn_target: 2\nn_descendant: 0\n"
            "n_specificity: 0\n"
        )
        runs = tmp_path / "runs"
        args = ["grid", str(cfg), "--root", str(runs)]
        line = the_error_after_progress(capsys, main(args + ["--time-budget", "0.00001"]))
        assert line == (
            "error: the grid's time budget (0.0006 s) is spent: 1 of 4 cells are done and kept "
            f"in {runs / 'timed'}; the same grid goes on from there"
        )
        assert len(list((runs / "timed" / "cells").glob("*.jsonl"))) == 1
        assert main(args) == 0  # the other three cells
        assert len(list((runs / "timed" / "cells").glob("*.jsonl"))) == 4
        capsys.readouterr()
        assert one_error_line(capsys, main(args + ["--time-budget", "0"])) == (
            "error: --time-budget must be above 0 minutes, got 0"
        )
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "fields, problem",
    [
        ("seeds: [0, '1']", "'seeds[1]' must be an integer, got '1' (str)"),
        ("temperature: warm", "'temperature' must be a number, got 'warm' (str)"),
        ("n_target: 2.5", "'n_target' must be an integer, got 2.5 (float)"),
        ("early_stop: 1", "'early_stop' must be true or false, got 1 (int)"),
        ("models: [3]", "'models[0]' must be a string, got 3 (int)"),
        ("technique_params: {steering: 0.8}", "'technique_params.steering' must be a mapping"),
    ],
)
def test_every_typed_grid_field_is_checked(tmp_path, fields, problem):
    from workbench.experiments import ExperimentConfig

    cfg = tmp_path / "grid.yaml"
    cfg.write_text(f"name: typed\n{fields}\n")
    with pytest.raises(ConfigError) as e:
        ExperimentConfig.from_yaml(cfg)
    assert str(e.value).startswith("config field " + problem)


def test_grid_backend_options_are_checked_by_type_before_any_model_loads(tmp_path, monkeypatch):
    import workbench.backends
    from workbench.experiments import ExperimentConfig, Runner
    from workbench.testing import tiny_benchmark

    monkeypatch.setattr(
        workbench.backends, "load_model", lambda *a, **k: pytest.fail("a model loaded")
    )
    model = "openai:served@http://127.0.0.1:9/v1"
    bench = tiny_benchmark()
    for options, problem in [
        ({"concurrency": "4"}, "option 'concurrency' must be an integer, got '4' (str)"),
        ({"cache": "no"}, "option 'cache' must be true or false, got 'no' (str)"),
        ({"colour": 1}, "cache and cache_path; got colour"),
    ]:
        config = ExperimentConfig(
            name="opts",
            models=(model,),
            techniques=("base",),
            targets=("river",),
            model_options={model: options},
        )
        with pytest.raises(ConfigError) as e:
            Runner(config, root=tmp_path, bench=bench, progress=False).run()
        assert str(e.value).startswith(f"config field 'model_options': model '{model}'")
        assert problem in str(e.value)
    assert files_under(tmp_path) == []


@pytest.mark.parametrize(
    "cls, options, problem",
    [
        ("VLLMOptions", {"max_model_len": "4096"}, "'max_model_len' must be an integer"),
        ("VLLMOptions", {"gpu_memory_utilization": "0.5"}, "'gpu_memory_utilization' must be a"),
        ("APIOptions", {"timeout": True}, "'timeout' must be a number, got True"),
        ("HFOptions", {"dtype": 16}, "'dtype' must be a string, got 16 (int)"),
    ],
)
def test_backend_options_are_checked_by_type(cls, options, problem):
    import workbench.backends as backends

    with pytest.raises(ConfigError) as e:
        getattr(backends, cls)(**options)
    assert str(e.value).startswith("option " + problem)


def test_refusal_eval_fields_are_checked_by_the_same_checker(tmp_path):
    from workbench.refusal import SuiteConfig

    for text, problem in [
        ("include_base: 'yes'", "'include_base' must be true or false, got 'yes' (str)"),
        ("judge: {categories: 'no'}", "'judge.categories' must be true or false"),
        ("sampling: {do_sample: 'no'}", "'sampling.do_sample' must be true or false"),
        ("limit: '10'", "'limit' must be an integer, got '10' (str)"),
        ("datasets: [{name: sanity, limit: 2.0}]", "'datasets[0].limit' must be an integer"),
        ("abstainers: [{technique: steering, target: x, seed: '1'}]", "'abstainers[0].seed'"),
    ]:
        cfg = tmp_path / "suite.yaml"
        cfg.write_text(text + "\n")
        with pytest.raises(ConfigError) as e:
            SuiteConfig.from_yaml(cfg)
        assert str(e.value).startswith(f"{cfg}: config field {problem}")


def test_the_shipped_configs_and_presets_still_pass():
    from workbench.experiments import ExperimentConfig
    from workbench.paths import repo_root
    from workbench.refusal import SuiteConfig
    from workbench.techniques.presets import PRESETS

    SuiteConfig.from_yaml(repo_root() / "configs" / "refusal_eval.yaml")
    for preset in PRESETS:
        assert ExperimentConfig(preset=preset).seeds


# -- an empty config file -------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "# only a comment\n", "{}\n"])
def test_an_empty_grid_file_is_an_error_not_the_default_grid(tmp_path, capsys, text):
    from workbench.cli import main

    cfg = tmp_path / "empty.yaml"
    cfg.write_text(text)
    line = one_error_line(capsys, main(["grid", str(cfg), "--root", str(tmp_path / "runs")]))
    assert line.startswith(f"error: {cfg}: no config fields in the file")
    assert not (tmp_path / "runs").exists()


# -- models: a wrong name is one line before the kernel starts; a hub id fails fast offline ---


@pytest.fixture()
def no_kernel(monkeypatch, tmp_path):
    """papermill must not start: the checks come first. Runs go to a temporary folder."""
    import papermill

    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(
        papermill, "execute_notebook", lambda *a, **k: pytest.fail("the kernel started")
    )
    return tmp_path / "runs"


@pytest.mark.parametrize(
    "notebook, parameter, message",
    [
        ("00_quickstart", "model=bogus", "parameter 'model': unknown model 'bogus': not a regis"),
        ("03_refusal_judge", "judge_model=./nowhere", "parameter 'judge_model': no model direc"),
        ("06_refusal_suite", "models=['smollm2-135m-instruct', 'bogus']", "unknown model 'bogus'"),
        ("01_select_abstention", "targets=['wn:bogus']", "parameter 'targets': unknown concept"),
        ("10_steering_inspector", "concept=river", "parameter 'concept': unknown concept id 'riv"),
        ("06_refusal_suite", "score_detector=phrasal", "parameter 'score_detector' got 'phrasal'"),
        ("01_select_abstention", "do_sample=no", "parameter 'do_sample' must be true or false"),
        ("05_categorical_editing", "layer=2.5", "parameter 'layer' must be an integer, got 2.5"),
        ("01_select_abstention", "data_dir=nowhere", "parameter 'data_dir': no benchmark in"),
    ],
)
def test_notebook_parameters_naming_models_concepts_and_detectors_are_checked_first(
    capsys, no_kernel, notebook, parameter, message
):
    from workbench.cli import main

    line = one_error_line(capsys, main(["run", notebook, "-p", parameter]))
    assert line.startswith(f"error: notebook {notebook}: ") and message in line
    assert files_under(no_kernel) == []


def test_a_select_benchmark_rejects_the_notebooks_wordnet_default_targets(tmp_path, no_kernel):
    from workbench.notebooks import validate_parameters
    from workbench.taxonomy import save_benchmark
    from workbench.testing import tiny_benchmark

    save_benchmark(tiny_benchmark(), tmp_path / "bench")
    with pytest.raises(ConfigError, match="parameter 'targets': unknown concept id 'wn:"):
        validate_parameters("01_select_abstention", {"data_dir": str(tmp_path / "bench")})
    validate_parameters(
        "01_select_abstention", {"data_dir": str(tmp_path / "bench"), "targets": ["river"]}
    )


def _closed_port() -> int:
    from workbench.backends.serve import free_port

    return free_port()  # bound, then closed: nothing listens there


@pytest.fixture()
def online(monkeypatch, tmp_path):
    """Hub access allowed (the tests' default is offline), an empty HF cache."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))


def test_a_hub_id_offline_and_not_cached_fails_at_once(monkeypatch, tmp_path):
    import time

    from workbench.backends import load_model
    from workbench.errors import ModelLoadError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    start = time.monotonic()
    with pytest.raises(ModelLoadError) as e:
        load_model("some-org/some-model")
    assert time.monotonic() - start < 5
    assert str(e.value) == (
        "could not load model 'some-org/some-model': it is not in the local Hugging Face cache, "
        "and HF_HUB_OFFLINE is set (unset it to download, or use a registered name or a local "
        "directory)"
    )


def test_an_unreachable_hub_is_asked_once_without_retries(monkeypatch, online):
    import time

    from workbench.backends import load_model
    from workbench.errors import ModelLoadError

    port = _closed_port()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    start = time.monotonic()
    with pytest.raises(ModelLoadError) as e:
        load_model("some-org/some-model")
    assert time.monotonic() - start < 5  # it retried for ~50 s
    assert str(e.value).startswith(
        "could not load model 'some-org/some-model': it is not in the local Hugging Face cache "
        f"and the hub (http://127.0.0.1:{port}) cannot be reached: "
    )


def test_an_id_the_hub_does_not_have_is_named(monkeypatch, online):
    import http.server
    import threading

    from workbench.errors import ModelLoadError
    from workbench.models.loading import check_model_name

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(401 if "gated" in self.path else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        with pytest.raises(ModelLoadError, match=r"the hub has no model of that id \(HTTP 404\)"):
            check_model_name("some-org/typo-model")
        with pytest.raises(ModelLoadError, match=r"\(HTTP 401\).*log in"):
            check_model_name("some-org/gated-model")
    finally:
        server.shutdown()


def test_a_cached_hub_model_loads_from_the_cache_when_the_hub_cannot_be_asked(
    monkeypatch, online, tmp_path
):
    from workbench.backends import load_model
    from workbench.testing import save_tiny, tiny_lm

    repo = tmp_path / "hf-cache" / "models--acme--tiny-chat"
    save_tiny(tiny_lm(seed=1), repo / "snapshots" / "0123abcd")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    for offline in ("0", "1"):
        monkeypatch.setenv("HF_HUB_OFFLINE", offline)
        lm = load_model("acme/tiny-chat", device="cpu")
        assert (lm.model_id, lm.revision) == ("acme/tiny-chat", "0123abcd")
        assert lm.source_dir == repo / "snapshots" / "0123abcd"


# -- SELECT's released results: the detector, the models, the benchmark ---------------------------


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    from select_results_fixture import write_results_release
    from workbench.taxonomy import import_select, save_benchmark

    root = tmp_path_factory.mktemp("select")
    fx = write_results_release(root / "clone")
    save_benchmark(import_select(fx["root"]), root / "bench")
    return fx["root"], root / "bench"


def import_results(release, runs: Path, *extra: str, run: str = "sel") -> int:
    from workbench.cli import main

    clone, bench = release
    args = ["import-select-results", str(clone), "--benchmark", str(bench), "--run", run]
    return main([*args, "--root", str(runs), "--workers", "1", "--allow-partial", *extra])


def test_an_unknown_detector_is_named_before_anything_is_imported(release, tmp_path, capsys):
    line = one_error_line(
        capsys, import_results(release, tmp_path / "runs", "--detector", "refused_nope")
    )
    assert line.startswith(
        "error: no refusal column 'refused_nope' in an imported run; known: refused_phrase, "
    )
    assert "select_flag_heuristic" in line
    assert not (tmp_path / "runs").exists()


def test_an_unknown_model_lists_every_alias_of_the_release(release, tmp_path, capsys):
    line = one_error_line(
        capsys, import_results(release, tmp_path / "runs", "--models", "Llama-Nope")
    )
    assert line == (
        "error: unknown model(s) 'Llama-Nope'; the release has: Tiny-IT-1B (acme/tiny-it-1b), "
        "Chat-API (openai/azure/chat-api)"
    )
    assert not (tmp_path / "runs").exists()


def test_a_benchmark_without_the_releases_targets_is_an_error_not_a_table(
    release, tmp_path, capsys
):
    from workbench.taxonomy import save_benchmark
    from workbench.testing import tiny_benchmark

    save_benchmark(tiny_benchmark(), tmp_path / "other")
    wrong = (release[0], tmp_path / "other")
    line = one_error_line(capsys, import_results(wrong, tmp_path / "runs"))
    assert (
        line.startswith("error: the benchmark ") and "holds none of the release's targets" in line
    )
    assert "python -m workbench taxonomy import-select" in line
    assert not (tmp_path / "runs").exists()


def test_two_imports_of_one_run_the_second_says_who_holds_it(release, tmp_path, capsys):
    """A slowed import holds the run; a second one at the same time fails in one line naming
    it, writes nothing, and the first finishes whole."""
    import subprocess
    import sys
    import time

    import pandas as pd

    script = (
        "import sys, time\n"
        "import workbench.tables.select_results as sr\n"
        "real = sr.import_file\n"
        "def slow(task):\n"
        "    time.sleep(0.5)\n"
        "    return real(task)\n"
        "sr.import_file = slow\n"
        "from workbench.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    clone, bench = release
    runs = tmp_path / "runs"
    first = subprocess.Popen(
        [sys.executable, "-c", script, "import-select-results", str(clone), "--benchmark"]
        + [str(bench), "--run", "sel", "--root", str(runs), "--workers", "1", "--allow-partial"]
        + ["--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    note = runs / "sel" / ".lock.json"
    deadline = time.time() + 120
    while not note.is_file():
        assert first.poll() is None and time.time() < deadline, first.stderr.read()
        time.sleep(0.05)
    line = one_error_line(capsys, import_results(release, runs))
    assert line.startswith(f"error: run {runs / 'sel'} is in use by import-select-results ")
    assert f"(process {first.pid} on " in line and ", started 20" in line
    assert first.wait(timeout=300) == 0, first.stderr.read()
    rows = pd.read_parquet(runs / "sel" / "results.parquet")  # the holder's file is whole
    assert len(rows) > 0 and not note.exists()
    assert [p.name for p in (runs / "sel").iterdir() if p.name.endswith(".tmp")] == []


def test_concurrent_writers_never_share_a_temporary_name(tmp_path):
    from workbench.paths import atomic_file

    final = tmp_path / "results.parquet"
    with atomic_file(final) as a, atomic_file(final) as b:
        assert a != b and a.parent == b.parent == tmp_path
        a.write_text("first")
        b.write_text("second")
    assert final.read_text() == "first"  # the last to finish wins, whole
    with pytest.raises(KeyboardInterrupt), atomic_file(final) as c:
        c.write_text("half")
        raise KeyboardInterrupt
    assert final.read_text() == "first" and sorted(p.name for p in tmp_path.iterdir()) == [
        "results.parquet"
    ]


# -- output folders that cannot be written: one line, before any work -----------------------------


@pytest.fixture()
def under_a_file(tmp_path) -> Path:
    """A folder path under a regular file: no process can write there, root included (tests
    run as root in CI, where a chmod-ed folder stays writable)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    return blocker / "out"


NOT_A_FOLDER = "a-file is a file, not a folder"


def test_grid_into_an_unwritable_folder(tmp_path, capsys, under_a_file, monkeypatch):
    import workbench.backends
    from workbench.cli import main

    monkeypatch.setattr(
        workbench.backends, "load_model", lambda *a, **k: pytest.fail("a model loaded")
    )
    cfg = tmp_path / "grid.yaml"
    cfg.write_text("name: ro\ntechniques: [base]\ntargets: ['wn:09411430-n']\n")
    line = one_error_line(capsys, main(["grid", str(cfg), "--root", str(under_a_file)]))
    assert line.startswith(f"error: cannot write to the run folder {under_a_file / 'ro'}: ")
    assert line.endswith(NOT_A_FOLDER)


def test_refusal_eval_into_an_unwritable_folder(tmp_path, capsys, under_a_file, monkeypatch):
    import workbench.backends
    from workbench.cli import main

    monkeypatch.setattr(
        workbench.backends, "load_model", lambda *a, **k: pytest.fail("a model loaded")
    )
    monkeypatch.setenv("WORKBENCH_RUNS", str(under_a_file))
    cfg = tmp_path / "suite.yaml"
    cfg.write_text("name: ro\ndatasets: [sanity]\n")
    line = one_error_line(capsys, main(["refusal-eval", str(cfg)]))
    assert line.startswith(f"error: cannot write to the run folder {under_a_file / 'ro'}: ")
    assert line.endswith(NOT_A_FOLDER)


def test_agreement_csv_into_an_unwritable_folder(capsys, under_a_file):
    from workbench.cli import main

    line = one_error_line(
        capsys, main(["scoring", "agreement", "--csv", str(under_a_file / "a.csv")])
    )
    assert line.startswith(f"error: cannot write to the folder of the --csv file {under_a_file}")
    assert line.endswith(NOT_A_FOLDER)


def test_taxonomy_import_select_into_an_unwritable_folder(capsys, release, under_a_file):
    from workbench.cli import main

    clone, _ = release
    status = main(["taxonomy", "import-select", str(clone), "--out", str(under_a_file / "bench")])
    line = one_error_line(capsys, status)
    assert line.startswith("error: cannot write to the benchmark folder --out ")
    assert line.endswith(NOT_A_FOLDER)


def test_import_select_results_into_an_unwritable_folder(capsys, release, under_a_file):
    line = one_error_line(capsys, import_results(release, under_a_file))
    assert line.startswith(f"error: cannot write to the run folder {under_a_file / 'sel'}: ")
    assert line.endswith(NOT_A_FOLDER)


def test_a_notebook_into_an_unwritable_runs_folder(capsys, no_kernel, under_a_file, monkeypatch):
    from workbench.cli import main

    monkeypatch.setenv("WORKBENCH_RUNS", str(under_a_file))
    line = one_error_line(capsys, main(["run", "00_quickstart"]))
    assert line.startswith(f"error: cannot write to the run folder {under_a_file / 'quickstart'}")
    assert line.endswith(NOT_A_FOLDER)


def test_unknownbench_build_into_an_unwritable_folder(capsys, under_a_file, monkeypatch):
    import workbench.unknown.datasets
    from workbench.cli import main

    monkeypatch.setattr(
        workbench.unknown.datasets,
        "build_unknown_dataset",
        lambda **k: pytest.fail("the build started"),
    )
    line = one_error_line(
        capsys, main(["unknown", "build", "--out", str(under_a_file / "unknown")])
    )
    assert line.startswith("error: cannot write to the dataset folder --out ")
    assert line.endswith(NOT_A_FOLDER)


def _on_read_only(ro: Path, command: str, timeout: float):
    """``command`` run with ``ro`` mounted read-only (a private mount namespace)."""
    import subprocess

    script = f"mount --bind {ro} {ro} && mount -o remount,ro,bind {ro} && exec {command}"
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=timeout,
    )


def _read_only_mount_works(path: Path) -> bool:
    import subprocess

    script = f"mount --bind {path} {path} && mount -o remount,ro,bind {path} && ! touch {path}/x"
    try:
        r = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True)
    except OSError:
        return False
    return r.returncode == 0


def test_a_read_only_folder_is_found_by_writing_to_it(tmp_path):
    """A folder that exists on a read-only file system (a bind mount in a private mount
    namespace, where unshare is allowed): the probe file finds it, as it would a folder of
    another user's."""
    import sys

    ro = tmp_path / "ro"
    (ro / "runs").mkdir(parents=True)
    if not _read_only_mount_works(ro):
        pytest.skip("no unshare/mount here to make a read-only folder")
    cfg = tmp_path / "grid.yaml"
    cfg.write_text("name: ro\ntechniques: [base]\ntargets: ['wn:09411430-n']\n")
    command = f"{sys.executable} -m workbench grid {cfg} --root {ro / 'runs'}"
    r = _on_read_only(ro, command, timeout=300)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"error: cannot write to the run folder {ro / 'runs' / 'ro'}: Read-only file system "
        f"({ro / 'runs'})"
    ]


# -- Ctrl-C on refusal-eval: one line, the finished chunks kept, the next call resumes -----------

SLOW_SUITE = """
import sys, time
import workbench.refusal.suite as suite

write = suite.write_frame

def slow(path, frame):  # each chunk takes a while, so the interrupt lands mid-run
    write(path, frame)
    time.sleep(0.4)

suite.write_frame = slow
from workbench.cli import main
sys.exit(main(["refusal-eval", sys.argv[1], "--quiet"]))
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_ctrl_c_on_refusal_eval_is_one_line_and_the_run_resumes(tmp_path, monkeypatch, sig):
    """Ctrl-C, or SIGTERM (which once ended the run with no message and a stale lock)."""
    import signal
    import subprocess
    import sys
    import time

    from test_refusal_suite import run_counting, tiny_suite_file

    runs = tmp_path / "runs"
    monkeypatch.setenv("WORKBENCH_RUNS", str(runs))
    cfg = tiny_suite_file(tmp_path, "stopped", 12)
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_SUITE, str(cfg)],
        env=subprocess_env(WORKBENCH_RUNS=str(runs)),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    chunks = runs / "stopped" / "chunks"
    deadline = time.time() + 120
    while len(list(chunks.glob("gen-*.parquet"))) < 2:
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read()
        time.sleep(0.02)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert err.strip().splitlines() == [
        f"error: interrupted; the finished chunks are kept in {chunks} and the same command "
        "resumes from them"
    ]
    kept = sorted(p.name for p in chunks.iterdir())
    assert 2 <= len(kept) < 6 and all(n.startswith("gen-") and n.endswith(".parquet") for n in kept)
    assert not (runs / "stopped" / "rows.parquet").exists()

    rows, calls = run_counting(cfg)
    assert len(calls) == 12 - 2 * len(kept)  # only what the interrupt left undone
    assert sorted(rows["prompt_id"]) == sorted(f"p{i}" for i in range(12))


@pytest.mark.notebook
def test_an_error_inside_a_notebook_is_one_line_naming_the_cell(tmp_path, capsys, monkeypatch):
    """A notebook's own check failing in its kernel (notebook 03's temperature, 04's data_dir)
    was a 50-line PapermillExecutionError traceback."""
    import nbformat

    from workbench.cli import main

    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "P"}
    nb.metadata["language_info"] = {"name": "python"}
    params = nbformat.v4.new_code_cell("temperature = 0.7  # sampling temperature")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        params,
        nbformat.v4.new_code_cell(
            "from workbench.errors import ConfigError\n"
            "if temperature <= 0:\n"
            "    raise ConfigError(f'temperature must be > 0, got {temperature}')"
        ),
    ]
    path = tmp_path / "checks.ipynb"
    nbformat.write(nb, str(path))
    status = main(["run", str(path), "-p", "temperature=-0.5", "--run-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("Executing")]
    assert status == 2 and len(lines) == 1, err  # papermill's progress bar, then one line
    # cell 3 of the executed copy: papermill adds the injected parameters after cell 1
    assert lines[0].startswith(
        "error: checks: cell 3 stopped with ConfigError: temperature must be > 0, got -0.5"
    )
    assert str(tmp_path / "out" / "checks.ipynb") in lines[0]  # the executed copy: traceback


@pytest.mark.notebook
def test_ctrl_c_on_a_notebook_run_is_one_line(tmp_path, tiny_model_dir):
    """Ctrl-C at a terminal reaches the command and its kernel (one process group): one line
    saying what is kept and how to go on, no kernel-channel traceback."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", "run", "00_quickstart"]
        + ["-p", f"model={tiny_model_dir}", "--run-dir", str(out)],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    executed = out / "00_quickstart.ipynb"
    deadline = time.time() + 180
    while True:  # a cell has run: the kernel is up and working
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read()
        try:
            cells = json.loads(executed.read_text())["cells"]
            if any(c.get("execution_count") for c in cells):
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    lines = [l for l in err.replace("\r", "\n").splitlines() if l.strip()]
    lines = [l for l in lines if not l.startswith("Executing")]  # papermill's progress bar
    assert proc.returncode == 2, err
    assert lines == [
        f"error: interrupted: 00_quickstart stopped; {out} keeps the results written before; "
        "the same command runs it again (a grid's finished cells are reused)"
    ], err


#: a command whose library left behind, when Ctrl-C stopped it, a failed asyncio task (as
#: nbclient's kernel-channel tasks do: DeadKernelError), collected only at exit; and, freed with
#: the interrupt's traceback, a coroutine it had made but not yet awaited (nbclient's next cell)
#: and an object whose clean-up fails
LEFTOVER_TASK = r"""
import asyncio, sys
from workbench.errors import Interrupted, run_command

kept = []

class Socket:
    def __del__(self):  # its clean-up fails once the interrupt has closed what it used
        raise RuntimeError("Socket operation on non-socket")

def library(kind):
    async def cell():
        pass

    waiting = cell()  # the interrupt comes before it is awaited
    socket = Socket()
    if kind == "own":
        raise Interrupted("interrupted: stopped; the same command runs it again")
    raise KeyboardInterrupt

def command(kind):
    async def channel():
        raise RuntimeError("Kernel died")

    loop = asyncio.new_event_loop()
    kept.append(loop.create_task(channel()))
    loop.run_until_complete(asyncio.sleep(0.01))  # the task fails; nobody retrieves it
    library(kind)

sys.exit(run_command(command, sys.argv[1]))
"""


@pytest.mark.parametrize("kind", ["own", "bare"])
def test_an_interrupt_hides_a_librarys_leftover_task_errors(kind):
    """The notebook Ctrl-C test's rare extra lines, made certain: after the one line, nothing
    ("Task exception was never retrieved" printed at exit, "coroutine ... was never awaited"
    and "Exception ignored in ..." when the interrupt's traceback is freed)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", LEFTOVER_TASK, kind],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: interrupted"), done.stderr


# -- an endpoint that is down: no retries, and a grid stops at it --------------------------------


def _dead_endpoint() -> str:
    return f"http://127.0.0.1:{_closed_port()}/v1"


def test_a_dead_endpoint_fails_at_once_not_after_retries(tmp_path):
    import time

    from workbench.backends import load_model
    from workbench.backends.openai_api import EndpointDown
    from workbench.generation import GenerationConfig, generate

    url = _dead_endpoint()
    lm = load_model(f"openai:served@{url}", options={"cache_path": str(tmp_path / "c.sqlite")})
    start = time.monotonic()
    with pytest.raises(EndpointDown) as e:
        generate(lm, ["Hello?", "Hi?"], GenerationConfig(max_new_tokens=4), progress=False)
    assert time.monotonic() - start < 5  # the client's retries took ~22 s
    assert str(e.value) == (
        f"endpoint {url} cannot be reached (Connection refused; is its server running, and the "
        "URL right?)"
    )
    lm.close()


def test_answers_in_the_cache_need_no_endpoint(tmp_path):
    from workbench.backends import load_model
    from workbench.backends.cache import request_key
    from workbench.backends.openai_api import EndpointDown

    url = _dead_endpoint()
    lm = load_model(f"openai:served@{url}", options={"cache_path": str(tmp_path / "c.sqlite")})
    body = {"model": "served", "messages": [{"role": "user", "content": "Hi?"}]}
    cached = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi."}}]}
    lm.cache.put(request_key(url + "/chat/completions", body), cached)
    assert lm._call("/chat/completions", body) == (cached, True)
    with pytest.raises(EndpointDown):
        lm._call("/chat/completions", {**body, "max_tokens": 3})
    lm.close()


#: A chat completion as an OpenAI-compatible server answers it.
ANSWER = {
    "id": "x",
    "object": "chat.completion",
    "created": 0,
    "model": "served",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Fine."},
            "finish_reason": "stop",
        }
    ],
}


def test_an_endpoint_that_stops_answering_is_down_for_every_request_after(tmp_path):
    from workbench.backends import load_model
    from workbench.backends.openai_api import EndpointDown

    server, url = _serve_json(200, ANSWER, [])
    options = {"cache": False, "max_retries": 0}
    lm = load_model(f"openai:served@{url}", options=options)
    body = {"model": "served", "messages": [{"role": "user", "content": "Hi?"}]}
    assert lm._call("/chat/completions", body)[0]["choices"][0]["message"]["content"] == "Fine."
    server.shutdown()
    server.server_close()
    with pytest.raises(EndpointDown, match=f"^endpoint {url} stopped answering"):
        lm._call("/chat/completions", body)
    with pytest.raises(EndpointDown, match="stopped answering"):  # no more tries
        lm._call("/chat/completions", {**body, "n": 1})
    lm.close()


def test_a_grid_stops_at_the_first_endpoint_that_is_down(tmp_path, capsys, monkeypatch):
    import json
    import time

    from workbench.cli import main

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    url = _dead_endpoint()
    cfg = tmp_path / "grid.yaml"
    cfg.write_text(
        f"name: dead\nmodels: ['openai:served@{url}']\ntechniques: [base, zero_shot]\n"
        "targets: ['wn:09411430-n', 'wn:10560637-n']\nn_target: 2\nn_descendant: 0\n"
        "n_specificity: 0\n"
    )
    start = time.monotonic()
    status = main(["grid", str(cfg), "--root", str(tmp_path / "runs")])
    assert time.monotonic() - start < 20  # it took ~22 s per cell, every cell tried
    line = the_error_after_progress(capsys, status)
    assert line == (
        f"error: endpoint {url} cannot be reached (Connection refused; is its server running, "
        "and the URL right?); the grid stopped at its first cell on it (0 of 4 cells done and "
        "kept; run it again once it answers)"
    )
    errors = (tmp_path / "runs" / "dead" / "errors.jsonl").read_text().splitlines()
    assert [json.loads(e)["error"] for e in errors] == ["EndpointDown"]  # one cell, not four
    assert not (tmp_path / "runs" / "dead" / "cells").exists()


@pytest.mark.parametrize(
    "fields, problem",
    [
        (
            "techniques: [steering]\ntechnique_params: {steering: {strength: high}}",
            "technique 'steering': parameter 'strength' must be a number, got 'high' (str)",
        ),
        (
            "techniques: [sft]\ntechnique_params: {sft: {epochs: '3'}}",
            "technique 'sft': parameter 'epochs' must be an integer, got '3' (str)",
        ),
        ("techniques: [base]\nn_target: -1", "'n_target' must be a non-negative integer, got -1"),
        (
            "techniques: [base]\nn_target: 0\nn_descendant: 0\nn_specificity: 0\nn_unrelated: 0",
            "are all 0: the grid would ask no question",
        ),
        ("techniques: [base]\ntemperature: -1", "'temperature' must be >= 0, got -1"),
    ],
    ids=[
        "strength as text",
        "epochs as text",
        "a negative count",
        "no question at all",
        "a negative temperature, greedy",
    ],
)
def test_grid_values_are_checked_before_any_model_loads(tmp_path, capsys, fields, problem):
    """Technique parameters by their declared types (a text strength once failed after two
    minutes of preparation), counts by their range, and a grid that would ask nothing (it once
    printed "0 rows" and exited 0)."""
    from workbench.cli import main

    cfg = tmp_path / "grid.yaml"
    cfg.write_text(f"name: typed\n{fields}\n")
    line = one_error_line(capsys, main(["grid", str(cfg), "--root", str(tmp_path / "runs")]))
    assert problem in line
    assert not (tmp_path / "runs").exists()


def _serve_json(status: int, answer: dict, seen: list, delay: float = 0.0):
    """A local HTTP server answering every POST with ``status`` and ``answer`` after ``delay``
    seconds (counting the requests in ``seen``); the server and its /v1 URL."""
    import http.server
    import json
    import threading
    import time

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(self.path)
            self.rfile.read(int(self.headers.get("content-length") or 0))
            time.sleep(delay)
            body = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (its timeout): what is tested

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def test_a_501_is_answered_at_once_not_retried(tmp_path):
    """Retrying cannot change a 501: one request, not seven (the client's six retries, in every
    cell, cost 94 s)."""
    from workbench.backends import load_model
    from workbench.backends.openai_api import EndpointError
    from workbench.generation import GenerationConfig, generate

    seen: list = []
    server, url = _serve_json(501, {"error": {"message": "not implemented"}}, seen)
    try:
        lm = load_model(f"openai:served@{url}", options={"cache_path": str(tmp_path / "c.sqlite")})
        with pytest.raises(EndpointError, match="NotImplemented|501|InternalServerError"):
            generate(lm, ["Hello?"], GenerationConfig(max_new_tokens=4), progress=False)
        assert len(seen) == 1
        lm.close()
    finally:
        server.shutdown()


def _silent_endpoint():
    """A listening socket that accepts connections and never answers, and its /v1 URL."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    return silent, f"http://127.0.0.1:{silent.getsockname()[1]}/v1"


def test_an_endpoint_that_never_answers_stops_the_grid_at_its_first_cell(tmp_path):
    """It accepts connections and never answers: after one request's timeout and retries the
    endpoint is down, so no later cell waits as long again."""

    from workbench.backends import load_model
    from workbench.backends.openai_api import EndpointDown
    from workbench.generation import GenerationConfig, generate

    silent, url = _silent_endpoint()
    try:
        lm = load_model(
            f"openai:served@{url}",
            options={"cache_path": str(tmp_path / "c.sqlite"), "timeout": 0.5, "max_retries": 1},
        )
        with pytest.raises(EndpointDown, match="does not answer"):
            generate(lm, ["Hello?"], GenerationConfig(max_new_tokens=4), progress=False)
        with pytest.raises(EndpointDown, match="does not answer"):  # at once: nothing sent
            lm._call("/chat/completions", {"model": "served", "messages": []})
        lm.close()
    finally:
        silent.close()


def test_a_timed_out_request_is_retried_once_not_max_retries_times(tmp_path):
    """Seven tries of the timeout each (14 minutes at the defaults) before a run on an
    endpoint that never answers could stop: now two."""
    import time

    from workbench.backends import load_model
    from workbench.backends.openai_api import EndpointDown
    from workbench.generation import GenerationConfig, generate

    silent, url = _silent_endpoint()
    try:
        lm = load_model(
            f"openai:served@{url}",
            options={"cache_path": str(tmp_path / "c.sqlite"), "timeout": 1.0, "max_retries": 6},
        )
        start = time.monotonic()
        with pytest.raises(EndpointDown, match="does not answer"):
            generate(lm, ["Hello?"], GenerationConfig(max_new_tokens=4), progress=False)
        took = time.monotonic() - start
        lm.close()
    finally:
        silent.close()
    assert 2.0 <= took < 5.5, took  # two timeouts and one backoff, not seven and six


@pytest.mark.parametrize(
    "answer, words",
    [({"choices": []}, "no choices"), (None, "not JSON")],
    ids=["no choices", "not JSON"],
)
def test_an_answer_that_is_no_completion_is_one_line_and_never_cached(tmp_path, answer, words):
    """An empty choices list was cached, so the run kept failing after the server was fixed;
    a body that is not JSON was a JSONDecodeError traceback."""
    import http.server
    import json
    import threading

    from workbench.backends import load_model
    from workbench.backends.openai_api import EndpointError
    from workbench.generation import GenerationConfig, generate

    state = {"fixed": False, "asked": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            state["asked"] += 1
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = (
                json.dumps(ANSWER).encode()
                if state["fixed"]
                else (b"<html>oops</html>" if answer is None else json.dumps(answer).encode())
            )
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    options = {"cache_path": str(tmp_path / "c.sqlite"), "max_retries": 0}
    config = GenerationConfig(max_new_tokens=4)
    try:
        lm = load_model(f"openai:served@{url}", options=options)
        with pytest.raises(EndpointError, match="not an OpenAI completion") as e:
            generate(lm, ["Hello?"], config, progress=False)
        assert words in str(e.value) and "\n" not in str(e.value)
        lm.close()
        state["fixed"] = True
        lm = load_model(f"openai:served@{url}", options=options)
        assert generate(lm, ["Hello?"], config, progress=False)[0].text == "Fine."
        assert state["asked"] == 2  # asked again: the bad answer was not cached
        lm.close()
    finally:
        server.shutdown()


def test_ctrl_c_while_an_endpoint_never_answers_ends_refusal_eval_at_once(tmp_path):
    """Requests in flight to an endpoint that accepts connections and never answers: Ctrl-C
    printed its line, then the command waited for them (120 s timeout x 6 retries each)."""
    import json
    import signal
    import socket
    import subprocess
    import sys
    import threading
    import time

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    asked = threading.Event()
    held: list[socket.socket] = []

    def accept():  # takes each connection, reads the request, never answers
        while True:
            try:
                conn, _ = silent.accept()
            except OSError:
                return
            held.append(conn)
            conn.settimeout(0.5)
            try:
                if b"POST" in conn.recv(4096):
                    asked.set()
            except OSError:
                pass

    threading.Thread(target=accept, daemon=True).start()
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
    data = tmp_path / "prompts.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "prompt": f"Question {i}?", "expected": "may_refuse"}) + "\n"
            for i in range(4)
        )
    )
    cfg = tmp_path / "suite.yaml"
    cfg.write_text(
        f"name: silent\nmodels: ['openai:served@{url}']\n"
        f"datasets: [{{name: mine, path: '{data}'}}]\nsampling: {{max_new_tokens: 4}}\n"
    )
    runs = tmp_path / "runs"
    env = subprocess_env(WORKBENCH_RUNS=str(runs), XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", "refusal-eval", str(cfg), "--quiet"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert asked.wait(120), proc.stderr.read() if proc.poll() is not None else "no request"
        time.sleep(0.5)  # the requests are in flight
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - start
    finally:
        proc.kill()
        silent.close()
        for conn in held:
            conn.close()
    assert proc.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: interrupted"), err
    assert took < 10, took


LATIN1 = "name: caf\u00e9\ntechniques: [base]\n".encode("latin-1")


@pytest.mark.parametrize(
    "argv, content, words",
    [
        (["grid"], LATIN1, "not UTF-8 text (byte 0xe9 at offset 9); save it as UTF-8"),
        (["refusal-eval"], LATIN1, "not UTF-8 text (byte 0xe9 at offset 9)"),
        (["scoring", "labels"], b'{"label": "refus\xe9"}\n', "not UTF-8 text (byte 0xe9"),
        (
            ["grid"],
            b"name: twice\ntechniques: [base]\nn_target: 2\nn_target: 3\n",
            "the key 'n_target' appears twice",
        ),
    ],
    ids=["grid latin-1", "refusal-eval latin-1", "labels latin-1", "a key given twice"],
)
def test_a_file_in_another_encoding_or_with_a_repeated_key_is_one_line(
    tmp_path, capsys, monkeypatch, argv, content, words
):
    """A config or labels file saved as Latin-1 was a UnicodeDecodeError traceback; a YAML key
    given twice silently took the last value."""
    import workbench.backends
    from workbench.cli import main

    monkeypatch.setattr(
        workbench.backends, "load_model", lambda *a, **k: pytest.fail("a model loaded")
    )
    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    path = tmp_path / "input.yaml"
    path.write_bytes(content)
    extra = ["--root", str(tmp_path / "runs")] if argv == ["grid"] else []
    line = one_error_line(capsys, main([*argv, str(path), *extra]))
    assert str(path) in line and words in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "argv, config, words",
    [
        (
            ["grid"],
            "name: m\ntechniques: [base]\nmodels: [no-such-model-xyz]\n",
            "config field 'models[0]': unknown model 'no-such-model-xyz'",
        ),
        (
            ["grid"],
            "name: d\ntechniques: [base]\nmodel_options: {smollm2-135m-instruct: {dtype: bf17}}\n",
            "unknown dtype 'bf17'",
        ),
        (
            ["refusal-eval"],
            "name: j\ndatasets: [sanity]\njudge: no-such-judge-xyz\n",
            "unknown model 'no-such-judge-xyz'",
        ),
        (
            ["refusal-eval"],
            "name: j\ndatasets: [sanity]\njudge: 5\n",
            "config field 'judge' must be a mapping of its settings (model, ",
        ),
        (
            ["refusal-eval"],
            "name: s\ndatasets: [sanity]\nsampling: [1, 2]\n",
            "config field 'sampling' must be a mapping of its settings (preset, ",
        ),
    ],
    ids=["unknown model", "unknown dtype", "unknown judge", "judge a number", "sampling a list"],
)
def test_names_are_resolved_before_any_run_folder_is_made(
    tmp_path, capsys, monkeypatch, argv, config, words
):
    """An unknown model, dtype or judge was found at model load, after progress bars, leaving a
    run folder with a config and a lock; a judge or sampling of the wrong shape was a
    traceback."""
    import workbench.backends
    from workbench.cli import main

    monkeypatch.setattr(
        workbench.backends, "load_model", lambda *a, **k: pytest.fail("a model loaded")
    )
    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "config.yaml"
    path.write_text(config)
    extra = ["--root", str(tmp_path / "runs")] if argv == ["grid"] else []
    line = one_error_line(capsys, main([*argv, str(path), *extra]))
    assert words in line
    assert not (tmp_path / "runs").exists()


LATIN1_JSONL = b'{"id": "a", "prompt": "caf\xe9?", "expected": "may_refuse"}\n'


@pytest.mark.parametrize(
    "files, argv, words",
    [
        (
            {"g.yaml": b"name: x\ntechniques: [base\n  n_target: 2\n"},
            ["grid", "{tmp}/g.yaml"],
            "g.yaml: invalid YAML: line 3, column 11: while parsing a flow sequence: "
            "expected ',' or ']', but got ':'",
        ),
        ({"g.yaml/": b""}, ["grid", "{tmp}/g.yaml"], "g.yaml is a folder; give the config file"),
        (
            {"r.yaml": b"name: j\ndatasets: [sanity]\njudge: {model: no-such-judge-xyz}\n"},
            ["refusal-eval", "{tmp}/r.yaml"],
            "config field 'judge.model': unknown model 'no-such-judge-xyz'",
        ),
        (
            {
                "r.yaml": b"name: j\ndatasets: [sanity]\n"
                b"abstainers: [{technique: steering, target: 'wn:nope-n'}]\n"
            },
            ["refusal-eval", "{tmp}/r.yaml"],
            "config field 'abstainers[0]': unknown concept id 'wn:nope-n'",
        ),
        (
            {"r.yaml": b"name: j\ndatasets: [sanity]\n"},
            ["refusal-eval", "{tmp}/r.yaml", "--limit", "-1"],
            "error: --limit must be a non-negative integer, got -1",
        ),
        (
            {"r.yaml": b"name: j\ndatasets: [sanity]\n"},
            ["refusal-eval", "{tmp}/r.yaml", "--name", "a/b"],
            "error: --name must be a plain directory name, got 'a/b'",
        ),
        (
            {"afile": b"x", "r.yaml": b"name: j\ndatasets: [xstest_safe]\ndata_dir: {tmp}/afile\n"},
            ["refusal-eval", "{tmp}/r.yaml"],
            "config field 'data_dir' names a file",
        ),
        (
            {
                "p.jsonl": LATIN1_JSONL,
                "r.yaml": b"name: j\ndatasets: [{name: mine, path: '{tmp}/p.jsonl'}]\n",
            },
            ["refusal-eval", "{tmp}/r.yaml"],
            "p.jsonl: not UTF-8 text (byte 0xe9 at offset 26); save it as UTF-8",
        ),
        (
            {"g.yaml": b"name: t\ntechniques: [base]\ntechnique_params: {steerng: {}}\n"},
            ["grid", "{tmp}/g.yaml"],
            "names 'steerng', which is no technique; did you mean 'steering'?",
        ),
        ({}, ["generate", "Hi", "--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
        (
            {},
            ["generate", "Hi", "--max-new-tokens", "100000"],
            "--max-new-tokens is 100000, more than model 'smollm2-135m-instruct' holds in one "
            "sequence (8192 tokens, prompt included)",
        ),
        (
            {"g.yaml": b"name: t\ntechniques: [base]\nmax_new_tokens: 9000\n"},
            ["grid", "{tmp}/g.yaml"],
            "config field 'max_new_tokens' is 9000, more than model 'smollm2-135m-instruct'",
        ),
        (
            {"r.yaml": b"name: j\ndatasets: [sanity]\nsampling: {max_new_tokens: 10000}\n"},
            ["refusal-eval", "{tmp}/r.yaml"],
            "config field 'sampling.max_new_tokens' is 10000, more than model",
        ),
        (
            {"g.yaml": b"? [a, b]\n: 1\nname: x\n"},
            ["grid", "{tmp}/g.yaml"],
            "invalid YAML: line 1, column 3: a key must be a plain name, not a list",
        ),
        (
            {"g.yaml": b"name: " + b"a" * 300 + b"\ntechniques: [base]\n"},
            ["grid", "{tmp}/g.yaml"],
            "config field 'name' is 300 bytes long; a run name may have at most 100",
        ),
        (
            {"r.yaml": b"name: j\ndatasets: [sanity]\nmargin: .nan\n"},
            ["refusal-eval", "{tmp}/r.yaml"],
            "config field 'margin' must be a number, got nan",
        ),
        (
            {"g.yaml": b"name: t\ntechniques: [base]\ndo_sample: true\ntemperature: .inf\n"},
            ["grid", "{tmp}/g.yaml"],
            "config field 'temperature' must be a number, got inf",
        ),
        (
            {"g.yaml": b"name: t\ntechniques: [sft]\ntechnique_params: {sft: {rank: 0}}\n"},
            ["grid", "{tmp}/g.yaml"],
            "technique 'sft': parameter 'rank' must be a positive integer, got 0",
        ),
        ({}, ["serve", "m", "--port", "99999"], "--port must be between 1 and 65535, got 99999"),
        (
            {"afile": b"x"},
            ["serve", "m", "--steering", "--registry", "{tmp}/afile"],
            "--registry must be a folder",
        ),
        (
            {
                "cdir/": b"",
                "g.yaml": b"name: c\ntechniques: [base]\nmodels: ['openai:s@http://127.0.0.1:9/v1']\n"
                b"model_options: {'openai:s@http://127.0.0.1:9/v1': {cache_path: '{tmp}/cdir'}}\n",
            },
            ["grid", "{tmp}/g.yaml"],
            "cannot write the response cache (option 'cache_path') ",
        ),
        (
            {
                "g.yaml": b"name: c\ntechniques: [base]\nmodels: ['openai:s@http://127.0.0.1:9/v1']\n"
                b"model_options: {'openai:s@http://127.0.0.1:9/v1': {timeout: -1}}\n"
            },
            ["grid", "{tmp}/g.yaml"],
            "timeout must be above 0 seconds, got -1",
        ),
        (
            {"outs/readme.json": b"{}"},
            ["unknown", "score-outputs", "{tmp}/outs"],
            "(a folder is searched for files named <model>_<NEC|",
        ),
    ],
    ids=[
        "YAML line and column",
        "config a folder",
        "judge model",
        "abstainer target",
        "--limit",
        "--name",
        "data_dir a file",
        "JSONL latin-1",
        "technique_params typo",
        "generate 0 tokens",
        "generate past the context",
        "grid past the context",
        "refusal-eval past the context",
        "a list as a key",
        "a 300-byte name",
        "NaN margin",
        "infinite temperature",
        "LoRA rank 0",
        "serve port",
        "serve registry a file",
        "cache_path a folder",
        "negative timeout",
        "no outputs named",
    ],
)
def test_each_mistake_names_its_field_or_option(tmp_path, capsys, monkeypatch, files, argv, words):
    """From a sweep of new faults: each was one line but named the wrong thing (a YAML error's
    excerpt cut mid-way, an option called a config field, a model without the field that named
    it, a codec message) or loaded a model before finding it."""
    line, _ = _mistake(tmp_path, capsys, monkeypatch, files, argv)
    assert words in line
    assert not (tmp_path / "runs").exists()


def _mistake(tmp_path, capsys, monkeypatch, files, argv) -> tuple[str, dict]:
    """Run command ``argv`` on ``files`` (name -> bytes; a name ending in / is a folder;
    ``{tmp}`` stands for ``tmp_path`` in both) with no model allowed to load and runs under
    ``tmp_path/runs``: its one error line, and each file's bytes as written."""
    import workbench.backends
    from workbench.cli import main

    monkeypatch.setattr(
        workbench.backends, "load_model", lambda *a, **k: pytest.fail("a model loaded")
    )
    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    written = {}
    for name, content in files.items():
        path = tmp_path / name
        if name.endswith("/"):
            path.mkdir()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.replace(b"{tmp}", str(tmp_path).encode()))
        written[path] = path.read_bytes()
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    extra = ["--root", str(tmp_path / "runs")] if argv[0] == "grid" else []
    return one_error_line(capsys, main([*args, *extra])), written


def test_a_torn_last_label_line_is_not_counted_as_superseded(tmp_path, capsys):
    from workbench.cli import main

    log = tmp_path / "labels.jsonl"
    row = '{"key": "a", "label": "%s", "question": "q", "response": "r"}\n'
    log.write_text(row % "refusal" + row % "compliance" + '{"key": "b", "label": "ref')
    assert main(["scoring", "labels", str(log)]) == 0
    out, err = capsys.readouterr()
    assert "1 superseded labels and withdrawals, 1 incomplete last line skipped" in out
    assert err.strip().startswith(f"warning: {log}, line 3: skipped an incomplete last line")


@pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="the case of a torch without CUDA"
)
def test_a_cuda_device_on_a_cpu_only_torch_is_one_line(tmp_path, capsys, monkeypatch):
    """It was 46-60 lines of traceback, from the grid and from generate."""
    from workbench.cli import main

    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    cfg = tmp_path / "grid.yaml"
    cfg.write_text(
        "name: c\ntechniques: [base]\nmodel_options: {smollm2-135m-instruct: {device: 'cuda:7'}}\n"
    )
    line = one_error_line(capsys, main(["grid", str(cfg), "--root", str(tmp_path / "runs")]))
    assert "device 'cuda:7': this torch" in line and "CPU-only build" in line
    line = one_error_line(capsys, main(["generate", "--device", "cuda", "Hi"]))
    assert "device 'cuda': this torch" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--workers", "0"], "error: --workers must be at least 1, got 0"),
        (
            ["--imports", "no_such_module_xyz"],
            "error: --imports names 'no_such_module_xyz', which this python cannot import (No "
            "module named 'no_such_module_xyz')",
        ),
        (
            ["--address", "127.0.0.1:9"],
            "error: nothing answers at the Ray address '127.0.0.1:9' (Connection refused; is "
            "the cluster running? ray start --head starts one)",
        ),
        (
            ["--address", "bogus"],
            "error: a Ray address is host:port or ray://host:port, got 'bogus'",
        ),
    ],
)
def test_grid_ray_options_are_checked_first(tmp_path, capsys, extra, message):
    from workbench.cli import main

    cfg = tmp_path / "grid.yaml"
    cfg.write_text("name: w\ntechniques: [base]\n")
    argv = ["grid", str(cfg), "--executor", "ray", *extra, "--root", str(tmp_path / "r")]
    assert one_error_line(capsys, main(argv)) == message
    assert not (tmp_path / "r").exists()


def test_a_full_disk_is_one_line_saying_what_was_kept(tmp_path, capsys, monkeypatch):
    """A full disk during a grid gave an OSError traceback (the finished cells were kept: now
    it says so)."""
    import errno

    from workbench.cli import main
    from workbench.experiments import Runner

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "runs" / "x"))

    monkeypatch.setattr(Runner, "run", full)
    cfg = tmp_path / "grid.yaml"
    cfg.write_text("name: full\ntechniques: [base]\n")
    line = one_error_line(capsys, main(["grid", str(cfg), "--root", str(tmp_path / "runs")]))
    assert line.startswith(f"error: No space left on device writing {tmp_path / 'runs' / 'x'}")
    assert "what was finished before is kept" in line


def test_a_damaged_record_is_one_line(tmp_path, monkeypatch):
    from workbench.errors import WorkbenchError
    from workbench.tables import measured

    monkeypatch.setattr(measured, "repo_root", lambda: tmp_path)
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "demo.json").write_text('{"techniques": [{"abst')
    with pytest.raises(WorkbenchError, match=r"record docs/results/demo.json is damaged"):
        measured.read_record(measured.RESULTS_DIR / "demo.json")


@pytest.mark.parametrize(
    "text, words",
    [('{"files": {"atomic": ', "is damaged"), ('["not", "a", "manifest"]', "is not a benchmark")],
    ids=["cut JSON", "a list"],
)
def test_a_malformed_benchmark_manifest_is_one_line(tmp_path, capsys, text, words):
    from workbench.cli import main

    (tmp_path / "manifest.json").write_text(text)
    line = one_error_line(capsys, main(["taxonomy", "stats", "--data", str(tmp_path)]))
    assert f"{tmp_path / 'manifest.json'} {words}" in line and "rebuild with" in line


@pytest.mark.parametrize(
    "content, words",
    [
        (b"a\tb\n1\t2\n", "is not taxi's edits file (a JSON object of columns"),
        (b'{"entity": {"0": "Korat"}}', "is not taxi's edits file: it has no column"),
    ],
    ids=["a TSV", "JSON of other columns"],
)
def test_releases_check_taxi_on_another_file_is_one_line(tmp_path, capsys, content, words):
    """It was pandas' "Trailing data" traceback."""
    from workbench.cli import main

    path = tmp_path / "edits-evaluation.json"
    path.write_bytes(content)
    line = one_error_line(capsys, main(["releases", "check", "taxi", str(path)]))
    assert f"{path} {words}" in line


def test_label_files_say_what_they_are_in_one_line(tmp_path, capsys):
    """A JSON array was reported as an "incomplete last line"; a skipped cut line was a raw
    UserWarning with Python's source line."""
    from workbench.cli import main

    array = tmp_path / "array.jsonl"
    array.write_text('[{"label": "refusal", "question": "q", "response": "r"}]')
    line = one_error_line(capsys, main(["scoring", "labels", str(array)]))
    assert "is one JSON array; a labels file is JSON Lines" in line
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"label": "refusal", "question": "q", "response": "r"}\n{"label": "ref')
    assert main(["scoring", "labels", str(cut), "--out", str(tmp_path / "cut.csv")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"warning: {cut}, line 2: skipped an incomplete last line")


def test_releases_describe_into_a_read_only_folder_is_one_line(tmp_path):
    """It was a PermissionError traceback (a read-only file system, as a bind mount in a
    private mount namespace)."""
    import sys

    from taxi_release import write_taxi_release

    ro = tmp_path / "ro"
    write_taxi_release(ro / "datasets", describe=False)
    if not _read_only_mount_works(ro):
        pytest.skip("no unshare/mount here to make a read-only folder")
    command = f"{sys.executable} -m workbench releases describe taxi {ro}"
    r = _on_read_only(ro, command, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith("error: cannot write") and "release manifest" in lines[0]
    assert not (ro / "datasets" / "release_manifest.json").exists()


def test_a_reader_that_stops_early_gets_no_traceback():
    """``python -m workbench params NB | head -1``: the reader closed the pipe before the
    command wrote; it once ended in a BrokenPipeError traceback."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", "params", "00_quickstart"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    assert proc.stdout is not None
    proc.stdout.close()  # as `head` does once it has what it wants
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.wait(timeout=60) == 1 and err == "", err


@pytest.mark.parametrize(
    "notebook, parameter, message",
    [
        (
            "03_refusal_judge",
            "labels_split=train",
            "parameter 'labels_split' got 'train'; choose from: test, dev, all",
        ),
        ("06_refusal_suite", "sampling=bogus", "parameter 'sampling' got 'bogus'; choose from:"),
        ("06_refusal_suite", "config_file=no_such.yaml", "parameter 'config_file': "),
        (
            "00_quickstart",
            "questions=[1, None]",
            "parameter 'questions[0]' must be a string, got 1 (int)",
        ),
        ("nope.ipynb", "x=1", "no notebook 'nope.ipynb'"),
        (
            "01_select_abstention",
            "max_new_tokens=100000",
            "parameter 'max_new_tokens' is 100000, more than model 'smollm2-135m-instruct'",
        ),
        ("01_select_abstention", "models=[]", "parameter 'models' is empty: name at least one"),
        ("05_categorical_editing", "editors=[]", "parameter 'editors' is empty: name at least one"),
        ("05_categorical_editing", "taxi_file=data/editing/categories.json", "'taxi_file': "),
        (
            "07_label_answers",
            "run_dir=data/labels/embedded.jsonl -p labels_file=data/labels/embedded.jsonl",
            "parameter 'labels_file': ",
        ),
        ("00_build_taxonomy", "out_dir=data", "parameter 'out_dir': "),
        ("00_build_taxonomy", "out_dir=README.md", "README.md is a file, not a folder"),
        (
            "03_refusal_judge",
            "labels_dir=/no/such/labels",
            "parameter 'labels_dir': /no/such/labels is not a folder",
        ),
        (
            "01_select_abstention",
            "release_run=no_such_run",
            "parameter 'release_run': no run 'no_such_run' with results",
        ),
        (
            "05_categorical_editing",
            "layer=999",
            "parameter 'layer': layer is 999, but model 'smollm2-135m-instruct' has 30 layers",
        ),
        (
            "07_label_answers",
            "run_dir=README.md",
            "parameter 'run_dir': ",
        ),
        ("07_label_answers", "labels_file=data", "parameter 'labels_file': "),
        ("06_refusal_suite", 'datasets=["bogus_set"]', "unknown dataset 'bogus_set'"),
        ("00_build_taxonomy", "branching=[3, 3, -1]", "'branching[2]' must be a positive integer"),
        ("00_quickstart", 'questions=["a", " "]', "parameter 'questions[1]' is blank"),
        ("04_unknown_concepts", "data_dir=README.md", "parameter 'data_dir': "),
        ("05_categorical_editing", "editing_preset=bogus", "parameter 'editing_preset' got"),
        ("05_categorical_editing", "subjects=bogus", "parameter 'subjects' got 'bogus'"),
        (
            "11_steering_gate",
            "figure_prefix=../../evil",
            "parameter 'figure_prefix': '../../evil' is not a plain file-name prefix",
        ),
        ("01_select_abstention", "release_run=/tmp/x", "parameter 'release_run': '/tmp/x' is"),
        (
            "02_select_compositions",
            'technique_params={"steering": 5}',
            "config field 'technique_params.steering' must be a mapping, got 5 (int)",
        ),
        (
            "01_select_abstention",
            'technique_params={"steering": {"strength": "x"}}',
            "technique 'steering': parameter 'strength' must be a number, got 'x' (str)",
        ),
        (
            "02_select_compositions",
            "executor=ray -p ray_workers=0",
            "notebook 02_select_compositions: ray_workers must be at least 1, got 0",
        ),
    ],
)
def test_notebook_values_are_checked_before_the_kernel(capsys, notebook, parameter, message):
    """Each once started the kernel: a model loaded and generated for minutes with zero labels,
    or papermill's traceback after a run folder was made."""
    from workbench.cli import main

    pairs = [a for p in parameter.split(" -p ") for a in ("-p", p)]
    line = one_error_line(capsys, main(["run", notebook, *pairs]))
    assert message in line


@pytest.mark.parametrize(
    "config, length",
    [
        ({"max_position_embeddings": 4096}, 4096),
        ({"n_positions": 1024}, 1024),
        ({"text_config": {"max_position_embeddings": 32768}}, 32768),
        ({"hidden_size": 8}, None),
    ],
    ids=["llama-like", "gpt2-like", "multimodal", "unsaid"],
)
def test_a_models_context_length_is_read_without_loading_it(tmp_path, config, length):
    """What bounds ``max_new_tokens`` before a model loads: a huge budget once loaded the model
    and then generated past its context until it was killed."""
    import json

    from workbench.backends import check_new_tokens
    from workbench.models.loading import context_length

    (tmp_path / "config.json").write_text(json.dumps(config))
    assert context_length(str(tmp_path)) == length
    check_new_tokens(str(tmp_path), length or 10**6)  # at the limit (or none known): fine
    check_new_tokens("openai:m@http://127.0.0.1:9/v1", 10**6)  # the endpoint's say
    if length:
        with pytest.raises(ConfigError, match=f"more than model .* holds .*{length} tokens"):
            check_new_tokens(str(tmp_path), length + 1)


@pytest.mark.parametrize("content", [b"", b'{\n "cells": [\n  {\n   "cell_'], ids=["empty", "cut"])
def test_a_notebook_file_that_is_empty_or_cut_short_is_one_line(tmp_path, capsys, content):
    """It was nbformat's JSONDecodeError traceback."""
    from workbench.cli import main

    path = tmp_path / "broken.ipynb"
    path.write_bytes(content)
    for argv in (["run", str(path)], ["params", str(path)]):
        line = one_error_line(capsys, main(argv))
        assert f"{path} cannot be read as a notebook" in line


def test_describing_a_folder_with_no_release_file_is_one_line(tmp_path, capsys):
    """It once wrote a manifest listing no file, and `releases check` then called the folder
    whole."""
    from workbench.cli import main

    (tmp_path / "atoms").mkdir()
    (tmp_path / "atoms" / "x.json").write_text("{}")
    line = one_error_line(capsys, main(["releases", "describe", "select", str(tmp_path)]))
    assert "no file of a select release found" in line
    assert not (tmp_path / "release_manifest.json").exists()


def test_published_outputs_that_are_not_utf8_are_one_line(tmp_path):
    from workbench.errors import WorkbenchError
    from workbench.unknown.outputs import OutputFile, _read_lines

    path = tmp_path / "out.json"
    path.write_bytes(b'{"prompt": "caf\xe9", "label": 0}\n')
    with pytest.raises(WorkbenchError, match="not UTF-8"):
        _read_lines(
            OutputFile(path=path, model="m", task="NEC", partition="answerable", confidence=False)
        )


def test_a_key_written_where_its_variable_name_belongs_is_refused_and_never_echoed(
    tmp_path, capsys
):
    """``api_key_env: sk-...`` was accepted and copied into the run's config.json."""
    from workbench.cli import main

    secret = "sk-test-SECRET-0123456789"
    url = "http://127.0.0.1:9/v1"
    cfg = tmp_path / "grid.yaml"
    cfg.write_text(
        f"name: keyed\nmodels: ['openai:x@{url}']\ntechniques: [base]\n"
        f"model_options: {{'openai:x@{url}': {{api_key_env: {secret}}}}}\n"
    )
    line = one_error_line(capsys, main(["grid", str(cfg), "--root", str(tmp_path / "runs")]))
    assert "api_key_env must name the environment variable" in line and secret not in line
    assert not (tmp_path / "runs").exists()


# -- the fourth sweep: outputs that would replace inputs, inputs read only after the work, a
# credential in a URL, run folders of another command ------------------------------------------

LABEL_ROW = b'{"key": "a", "label": "refusal", "question": "q", "response": "r"}\n'


@pytest.mark.parametrize(
    "files, argv, words",
    [
        (
            {"lab.jsonl": LABEL_ROW},
            ["scoring", "labels", "{tmp}/lab.jsonl", "--out", "{tmp}/lab.jsonl"],
            "the --out file {tmp}/lab.jsonl is an input {tmp}/lab.jsonl",
        ),
        (
            {"lab.jsonl": LABEL_ROW},
            ["scoring", "agreement", "--labels", "{tmp}/lab.jsonl", "--csv", "{tmp}/lab.jsonl"],
            "the --csv file {tmp}/lab.jsonl is an input",
        ),
        (
            {"outs/m_NEC_answerable.json": b"[]"},
            ["unknown", "score-outputs", "{tmp}/outs", "--out", "{tmp}/outs/m_NEC_answerable.json"],
            "is inside the input folder {tmp}/outs: writing it would replace what this command reads",
        ),
        (
            {"ref/": b""},
            ["verify", "--record", "--reference", "{tmp}/ref"],
            "cannot write the --reference file {tmp}/ref: it is a folder",
        ),
        (
            {"logs/": b""},
            ["serve", "smollm2-135m-instruct", "--log-file", "{tmp}/logs"],
            "cannot write the --log-file {tmp}/logs: it is a folder",
        ),
        (
            {
                "g.yaml": b"name: c\ntechniques: [base]\n"
                b"models: ['openai:gpt-x@http://u:sk-SECRET-999@127.0.0.1:9/v1']\n"
            },
            ["grid", "{tmp}/g.yaml"],
            "openai:gpt-x@http://***@127.0.0.1:9/v1': the endpoint URL carries a credential",
        ),
        (
            {"m/config.json": b"[1, 2]", "m/model.safetensors": b"x"},
            ["generate", "Hi", "--model", "{tmp}/m"],
            "{tmp}/m/config.json is not a model config (a JSON object)",
        ),
        (
            {"m/config.json": b"{}", "m/model.safetensors": b"x"},
            ["generate", "Hi", "--model", "{tmp}/m"],
            "{tmp}/m has no tokenizer (tokenizer.json, ",
        ),
        ({}, ["generate", "  "], "question 1 is blank"),
        (
            {"g.yaml": b"name: d\ntechniques: [base, zero_shot, base]\n"},
            ["grid", "{tmp}/g.yaml"],
            "config field 'techniques' lists 'base' twice",
        ),
        ({}, ["taxonomy", "find", "river", "--limit", "0"], "--limit must be at least 1, got 0"),
        (
            {"g.yaml": b"name: s\ntechniques: [base]\nseeds: [0, -1]\n"},
            ["grid", "{tmp}/g.yaml"],
            "config field 'seeds[1]' must be a non-negative integer, got -1",
        ),
        (
            {"wn/": b""},
            ["taxonomy", "build", "--out", "{tmp}/wn", "--wordnet-dir", "{tmp}/wn"],
            "--out {tmp}/wn is the --wordnet-dir folder {tmp}/wn",
        ),
        (
            {"rel/": b""},
            ["taxonomy", "import-select", "{tmp}/rel", "--out", "{tmp}/rel/data/SELECT"],
            "--out {tmp}/rel/data/SELECT is inside the release folder {tmp}/rel",
        ),
        (
            {
                "r.yaml": b"name: j\ndatasets: [sanity]\n"
                b"abstainers: [{technique: steering, target: x, benchmark: '{tmp}/none'}]\n"
            },
            ["refusal-eval", "{tmp}/r.yaml"],
            "config field 'abstainers[0].benchmark': ",
        ),
        (
            {
                "g.yaml": b"name: c\ntechniques: [base]\nmodels: ['openai:gpt-x']\n"
                b"model_options: {'openai:gpt-x': {base_url: 'http://bob:sk-SECRET-1@127.0.0.1:9/v1'}}\n"
            },
            ["grid", "{tmp}/g.yaml"],
            "option base_url (http://***@127.0.0.1:9/v1) carries a credential",
        ),
        (
            {
                "g.yaml": b"name: c\ntechniques: [base]\nmodels: ['openai:s@http://127.0.0.1:9/v1']\n"
                b"model_options: {'openai:s@http://127.0.0.1:9/v1': {cache_path: '{tmp}/g.yaml'}}\n"
            },
            ["grid", "{tmp}/g.yaml"],
            "option cache_path: {tmp}/g.yaml is not a response cache (an SQLite file)",
        ),
        (
            {"r.yaml": b"name: j\ndatasets: [sanity]\nrefusal_threshold: 150\n"},
            ["refusal-eval", "{tmp}/r.yaml"],
            "config field 'refusal_threshold' is a percentage (0 to 100), got 150",
        ),
        (
            {
                "p.jsonl": b'{"prompt": [{"role": "user", "content": "hi"}]}\n',
                "r.yaml": b"name: j\ndatasets: [{name: mine, path: '{tmp}/p.jsonl', "
                b"expected: should_refuse}]\n",
            },
            ["refusal-eval", "{tmp}/r.yaml"],
            "row 1: 'prompt' must be text, got a list",
        ),
        (
            {"g.yaml": b'name: "bad\\0name"\ntechniques: [base]\n'},
            ["grid", "{tmp}/g.yaml"],
            "config field 'name' holds a control character: 'bad\\x00name'",
        ),
        (
            {"g.yaml": b'name: "t27\\n"\ntechniques: [base]\n'},
            ["grid", "{tmp}/g.yaml"],
            "config field 'name' holds a control character: 't27\\n'",
        ),
        (
            {"g.yaml": b'name: " t18"\ntechniques: [base]\n'},
            ["grid", "{tmp}/g.yaml"],
            "config field 'name' begins or ends with a space: ' t18'",
        ),
        (
            {"g.yaml": b"name: r\ntechniques: [base]\n"},
            ["grid", "{tmp}/g.yaml", "--address", "ray://10.0.0.1:10001", "--workers", "8"],
            "--address, --workers need --executor ray",
        ),
        ({}, ["serve", "m", "--api-key", ""], "--api-key is empty"),
        ({"e.csv": b""}, ["scoring", "agreement", "--labels", "{tmp}/e.csv"], "e.csv is empty"),
        (
            {
                "g.yaml": b"name: t\ntechniques: [steering]\ntechnique_params: {steering: {strenght: 2}}\n"
            },
            ["grid", "{tmp}/g.yaml"],
            "config field 'technique_params.steering': ",
        ),
    ],
    ids=[
        "labels --out is the log",
        "agreement --csv is the labels",
        "score-outputs --out an input",
        "verify --record into a folder",
        "serve --log-file a folder",
        "a credential in the URL",
        "config.json a list",
        "no tokenizer",
        "a blank question",
        "a technique twice",
        "find --limit 0",
        "a negative seed",
        "build --out the WordNet folder",
        "import-select --out in the release",
        "abstainer benchmark",
        "base_url with a password",
        "cache_path no cache",
        "threshold 150 %",
        "a prompt that is a chat",
        "a NUL in a run name",
        "a newline in a run name",
        "a space before a run name",
        "Ray options without Ray",
        "an empty API key",
        "an empty labels CSV",
        "a typo in technique_params",
    ],
)
def test_fourth_sweep_mistakes_are_one_line_and_change_nothing(
    tmp_path, capsys, monkeypatch, files, argv, words
):
    """Each wrote over its own input (a labels log, the shipped labelled set, an output file),
    worked for minutes before finding a path it writes at the end, printed a traceback, took a
    chat for a prompt's text, or wrote an endpoint's password into the run's config."""
    line, before = _mistake(tmp_path, capsys, monkeypatch, files, argv)
    assert words.replace("{tmp}", str(tmp_path)) in line
    assert "SECRET" not in line
    assert not (tmp_path / "runs").exists()
    assert {p: p.read_bytes() for p in before} == before


def _run_line(capsys, tmp_path, command: str, name: str, root) -> str:
    """The one error line of ``grid`` or ``refusal-eval`` for a run ``name`` under ``root`` (the
    runs root: ``--root`` and WORKBENCH_RUNS)."""
    import os

    from workbench.cli import main

    cfg = tmp_path / "c.yaml"
    body = "techniques: [base]\n" if command == "grid" else "datasets: [sanity]\n"
    cfg.write_text(f"name: {name}\n" + body)
    argv = [command, str(cfg)] + (["--root", str(root)] if command == "grid" else [])
    os.environ["WORKBENCH_RUNS"] = str(root)
    try:
        return one_error_line(capsys, main(argv))
    finally:
        del os.environ["WORKBENCH_RUNS"]


@pytest.mark.parametrize(
    "made_by, theirs, command, kind",
    [
        ("chunks", '{"datasets": ["sanity"], "judge": {}}', "grid", "refusal-eval"),
        ("cells", '{"theirs": true}', "refusal-eval", "grid"),
    ],
)
def test_a_run_folder_of_another_command_is_refused_and_left_as_it_was(
    tmp_path, capsys, made_by, theirs, command, kind
):
    """A grid named as a finished refusal-eval run replaced its config.json and added its
    tables, exit 0 (and the refusal-eval run put its own back on the next call). Folders
    written before runs were marked are known by what their command wrote."""
    run = tmp_path / "runs" / "r7"
    (run / made_by).mkdir(parents=True)
    (run / "config.json").write_text(theirs)
    line = _run_line(capsys, tmp_path, command, "r7", tmp_path / "runs")
    assert f"run {run} holds a {kind} run; give this {command} run another name" in line
    assert sorted(p.name for p in run.iterdir()) == sorted([made_by, "config.json"])
    assert (run / "config.json").read_text() == theirs


@pytest.mark.parametrize("command", ["grid", "refusal-eval"])
@pytest.mark.parametrize(
    "files", [["sanity.jsonl"], ["config.json", "model.safetensors", "tokenizer.json", "vocab.txt"]]
)
def test_a_folder_that_holds_no_run_is_not_taken_as_one(tmp_path, capsys, command, files):
    """`grid --root <checkout>/data` with the name `refusal` wrote its lock, cells, config and
    tables among the benchmark's files (and a model folder named as a run fared the same)."""
    root = tmp_path / "data"
    run = root / "refusal"
    run.mkdir(parents=True)
    for name in files:
        (run / name).write_text("{}")
    line = _run_line(capsys, tmp_path, command, "refusal", root)
    shown = ", ".join(sorted(files)[:3]) + (" and 1 more" if len(files) > 3 else "")
    assert f"run {run} is a folder that holds no workbench run but other files ({shown})" in line
    assert sorted(p.name for p in run.iterdir()) == sorted(files)


def test_a_notebook_run_in_a_folder_that_holds_no_run_is_refused(no_kernel, tmp_path, capsys):
    """The notebooks' runs take the same check before the kernel starts."""
    from workbench.errors import OutputError
    from workbench.notebooks import run_notebook

    held = no_kernel / "steering_gate"
    held.mkdir(parents=True)
    (held / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="is a folder that holds no workbench run but other"):
        run_notebook("11_steering_gate", {}, progress=False)
    assert [p.name for p in held.iterdir()] == ["notes.txt"]


def test_a_run_dir_holding_the_users_own_copy_of_the_notebook_is_refused(no_kernel, tmp_path):
    """--run-dir is taken as the user's place, but a notebook of the same name there (their
    edited copy) was replaced by the run's input and executed copies."""
    from workbench.errors import OutputError
    from workbench.notebooks import run_notebook

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "00_quickstart.ipynb").write_text("my edits")
    with pytest.raises(OutputError, match="holds 00_quickstart.ipynb, which this run would"):
        run_notebook("00_quickstart", {}, run_dir=mine, progress=False)
    assert [p.name for p in mine.iterdir()] == ["00_quickstart.ipynb"]
    assert (mine / "00_quickstart.ipynb").read_text() == "my edits"


def test_a_notebook_run_under_another_name_writes_its_outputs_in_its_own_folder(no_kernel):
    """00's out_dir defaults into the default run's folder: a build with other parameters
    wrote its benchmark over the default build's."""
    import papermill

    from workbench.notebooks import run_notebook

    seen = {}
    papermill.execute_notebook = lambda src, out, parameters, **k: seen.update(parameters)
    run_notebook("00_build_taxonomy", {"branching": [3, 3]}, progress=False)
    assert seen["run_name"].startswith("taxonomy_build-")
    assert seen["out_dir"] == f"runs/{seen['run_name']}/data"
    seen.clear()
    run_notebook("00_build_taxonomy", {"run_name": "mine"}, progress=False)
    assert seen["out_dir"] == "runs/mine/data"
    seen.clear()
    run_notebook("00_build_taxonomy", {"run_name": "mine", "out_dir": "elsewhere"}, progress=False)
    assert seen["out_dir"] == "elsewhere"


def test_an_imports_module_that_does_not_import_is_one_line(tmp_path, capsys, monkeypatch):
    """A module with a syntax error passed the check (it was only looked up) and failed in
    every Ray worker."""
    from workbench.cli import main

    (tmp_path / "broken_techniques.py").write_text("def (:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = tmp_path / "g.yaml"
    cfg.write_text("name: i\ntechniques: [base]\n")
    line = one_error_line(
        capsys,
        main(["grid", str(cfg), "--imports", "broken_techniques", "--root", str(tmp_path / "r")]),
    )
    assert "--imports names 'broken_techniques', which this python cannot import (" in line
    assert not (tmp_path / "r").exists()


def test_a_credential_in_openai_base_url_is_refused_and_never_echoed(tmp_path, capsys, monkeypatch):
    """With the endpoint in OPENAI_BASE_URL the password reached stderr and errors.jsonl."""
    from workbench.cli import main

    monkeypatch.setenv("OPENAI_BASE_URL", "http://bob:sk-SECRET-4@127.0.0.1:9/v1")
    cfg = tmp_path / "g.yaml"
    cfg.write_text("name: c\ntechniques: [base]\nmodels: ['openai:gpt-x']\n")
    line = one_error_line(capsys, main(["grid", str(cfg), "--root", str(tmp_path / "runs")]))
    assert "OPENAI_BASE_URL (http://***@127.0.0.1:9/v1) carries a credential" in line
    assert "SECRET" not in line and not (tmp_path / "runs").exists()


def test_a_grid_named_as_a_notebooks_run_is_refused(no_kernel, tmp_path, capsys):
    """A grid named steering_gate wrote its cells and tables into notebook 11's run folder."""
    import papermill

    from workbench.cli import main
    from workbench.notebooks import run_notebook

    papermill.execute_notebook = lambda *a, **k: None
    run_notebook("11_steering_gate", {}, progress=False)
    held = no_kernel / "steering_gate"
    before = sorted(p.name for p in held.iterdir())
    cfg = tmp_path / "g.yaml"
    cfg.write_text("name: steering_gate\ntechniques: [base]\n")
    line = one_error_line(capsys, main(["grid", str(cfg), "--root", str(no_kernel)]))
    assert f"run {held} holds a notebook run; give this grid run another name" in line
    assert sorted(p.name for p in held.iterdir()) == before


def test_a_vllm_model_where_vllm_is_not_installed_is_one_line_before_the_run(tmp_path, capsys):
    """It was found when the cell loaded the model, after the run folder was made."""
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed in this environment")
    from workbench.cli import main

    cfg = tmp_path / "g.yaml"
    cfg.write_text("name: v\ntechniques: [base]\nmodels: ['vllm:smollm2-135m-instruct']\n")
    line = one_error_line(capsys, main(["grid", str(cfg), "--root", str(tmp_path / "runs")]))
    assert "config field 'models[0]': the vLLM back end needs vLLM in this environment" in line
    assert not (tmp_path / "runs").exists()


# -- the ninth sweep: links that lead nowhere, fields of the wrong type in labels, gold answers
# and a verify reference, a folder that is someone else's, an output file that is not ours ------


def _reference_with(change) -> bytes:
    import json

    from workbench.paths import repo_root

    reference = json.loads((repo_root() / "data/reference/verify.json").read_text())
    change(reference)
    return json.dumps(reference).encode()


def _seed_text(r):
    r["rows"][0]["seed"] = "abc"


def _row_number(r):
    r["rows"][0] = 5


NOTES = b"mine, not a table\n"


@pytest.mark.parametrize(
    "files, argv, words",
    [
        (
            {"lab.jsonl": b'{"key": "a", "label": "refusal", "question": "q", "response": 12}\n'},
            ["scoring", "agreement", "--labels", "{tmp}/lab.jsonl"],
            "lab.jsonl, line 1: malformed label line (response must be text, got 12 (int))",
        ),
        (
            {"lab.jsonl": b'{"key": "a", "label": "refusal", "question": 7, "response": null}\n'},
            ["scoring", "labels", "{tmp}/lab.jsonl"],
            "malformed label line (question must be text, got 7 (int))",
        ),
        (
            {
                "outs/m_RefuNQ_answerable.json": b'{"prompt": "Who?", "label": [1, null], "m": "P"}\n'
            },
            ["unknown", "score-outputs", "{tmp}/outs"],
            "line 1: label must be a list of gold answers as text, got [1, null]",
        ),
        (
            {"ref.json": _reference_with(_seed_text)},
            ["verify", "--reference", "{tmp}/ref.json"],
            'is not a verify reference: rows[0].seed is "abc", not a whole number',
        ),
        (
            {"ref.json": _reference_with(_row_number)},
            ["verify", "--reference", "{tmp}/ref.json"],
            "is not a verify reference: rows[0] is 5, not a mapping",
        ),
        (
            {"lab.jsonl": LABEL_ROW, "README.md": NOTES},
            ["scoring", "labels", "{tmp}/lab.jsonl", "--out", "{tmp}/README.md"],
            "the --out file {tmp}/README.md is there and is not a table this command writes",
        ),
        (
            {"lab.jsonl": LABEL_ROW, "notes.csv": NOTES},
            ["scoring", "agreement", "--labels", "{tmp}/lab.jsonl", "--csv", "{tmp}/notes.csv"],
            "the --csv file {tmp}/notes.csv is there and is not a table this command writes",
        ),
        (
            {"mine/manifest.json": b'{"mine": 1}', "mine/notes.txt": b"keep"},
            ["taxonomy", "build", "--out", "{tmp}/mine"],
            "--out {tmp}/mine holds other files (manifest.json, notes.txt) and no benchmark",
        ),
        (
            {"outs/m_NEC_answerable.json": b'{"prompt": "X?", "label": 1, "m": "No."}\n'}
            | {"mine.txt": NOTES},
            ["unknown", "score-outputs", "{tmp}/outs", "--out", "{tmp}/mine.txt"],
            "the --out file {tmp}/mine.txt is there and is not a table this command writes",
        ),
        (
            {"proj/manifest.json": b'{"my": "project"}'},
            ["unknown", "build", "--out", "{tmp}/proj"],
            "--out {tmp}/proj holds other files (manifest.json) and no UnknownBench data set",
        ),
        (
            {"rel/": b""},
            ["import-select-results", "{tmp}/rel", "--benchmark", "data", "--run", "w0"]
            + ["--workers", "0"],
            "--workers must be at least 1, got 0",
        ),
        (
            {"rel/": b""},
            ["import-select-results", "{tmp}/rel", "--benchmark", "data", "--run", "../escape"],
            "--run must be a plain directory name, got '../escape'",
        ),
    ],
    ids=[
        "a label's response a number",
        "a label's question a number",
        "gold answers not text",
        "a reference seed as text",
        "a reference row a number",
        "labels --out a README",
        "agreement --csv someone's notes",
        "build --out someone's folder",
        "score-outputs --out someone's file",
        "unknown build --out someone's folder",
        "import --workers 0",
        "import --run a path",
    ],
)
def test_ninth_sweep_mistakes_are_one_line_and_change_nothing(
    tmp_path, capsys, monkeypatch, files, argv, words
):
    """Each was a traceback, replaced a file that was not the command's (a README, a folder's
    manifest.json), or ran with a worker count other commands refuse."""
    line, before = _mistake(tmp_path, capsys, monkeypatch, files, argv)
    assert words.replace("{tmp}", str(tmp_path)) in line
    assert not (tmp_path / "runs").exists()
    assert {p: p.read_bytes() for p in before} == before
    assert not list(tmp_path.glob("*.current.csv"))


@pytest.mark.parametrize("link", ["loop", "dangling"])
@pytest.mark.parametrize("command", ["grid", "refusal-eval"])
def test_a_runs_root_that_is_a_link_to_nothing_is_one_line(tmp_path, capsys, link, command):
    """A root that was a loop of links or a link to a missing folder passed the check and
    failed with an OSError traceback when the run folder was made."""
    root = tmp_path / "root"
    if link == "loop":
        (tmp_path / "other").symlink_to(root)
        root.symlink_to(tmp_path / "other")
    else:
        root.symlink_to(tmp_path / "missing")
    line = _run_line(capsys, tmp_path, command, "r", root)
    assert f"{root} is a symbolic link that leads nowhere" in line
    assert not (tmp_path / "missing").exists()
