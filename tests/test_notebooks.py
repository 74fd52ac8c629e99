"""Notebooks run headless through the runner; bad parameters fail before any cell runs."""

import pandas as pd
import pytest

from workbench.errors import ConfigError
from workbench.notebooks import (
    find_notebook,
    notebook_parameters,
    parse_parameter,
    validate_parameters,
)
from workbench.paths import repo_root


def test_every_notebook_has_a_literal_parameters_cell():
    from workbench.cli.experiments import ALL_NOTEBOOKS

    for name in ALL_NOTEBOOKS:
        params = notebook_parameters(name)
        assert params, name


def test_unknown_parameter_is_rejected_naming_it():
    with pytest.raises(ConfigError, match="no parameter 'max_tokens'.*max_new_tokens"):
        validate_parameters(find_notebook("00_quickstart"), {"max_tokens": 3})


def test_wrongly_typed_parameter_is_rejected():
    with pytest.raises(ConfigError, match="'max_new_tokens' must be an integer, got 'many'"):
        validate_parameters(find_notebook("00_quickstart"), {"max_new_tokens": "many"})


def test_unknown_notebook_lists_the_available_ones():
    with pytest.raises(ConfigError, match="no notebook 'nope'.*00_quickstart"):
        find_notebook("nope")


def test_parse_parameter():
    assert parse_parameter("n=3") == ("n", 3)
    assert parse_parameter("model=smollm2-135m-instruct") == ("model", "smollm2-135m-instruct")
    assert parse_parameter("qs=['a', 'b']") == ("qs", ["a", "b"])
    with pytest.raises(ConfigError):
        parse_parameter("novalue")


@pytest.mark.notebook
@pytest.mark.integration
def test_quickstart_runs_headless(tmp_path):
    import html
    import json
    import shutil

    from workbench.notebooks import run_notebook
    from workbench.paths import repo_root

    run_name = f"test-quickstart-{tmp_path.name}"
    figures_before = sorted((repo_root() / "figures").iterdir())
    try:
        out = run_notebook(
            "00_quickstart",
            {
                "questions": ["Name a river.", "Name a mountain."],
                "max_new_tokens": 24,
                "run_name": run_name,
            },
            progress=False,
        )
        run = repo_root() / "runs" / run_name
        assert out == run / "00_quickstart.ipynb"  # every output of the run in its own folder
        table = pd.read_csv(run / "answers.csv")
        assert list(table["prompt"]) == ["Name a river.", "Name a mountain."]
        assert (table["n_tokens"] <= 24).all() and table["response"].str.len().gt(0).all()
        # the table shows each answer whole (a DataFrame's display cuts at 50 characters)
        assert table["response"].str.len().max() > 50
        shown = "".join(
            "".join(o.get("data", {}).get("text/html", ""))
            for c in json.loads(out.read_text())["cells"]
            for o in c.get("outputs", [])
        )
        for response in table["response"]:
            assert response in html.unescape(shown), response
        assert (run / "figures" / "answer_lengths.png").is_file()
        assert sorted((repo_root() / "figures").iterdir()) == figures_before
    finally:
        shutil.rmtree(repo_root() / "runs" / run_name, ignore_errors=True)


@pytest.mark.notebook
def test_build_taxonomy_notebook_reproduces_the_shipped_data(tmp_path, wordnet):
    import json

    from workbench.notebooks import run_notebook

    out = run_notebook(
        "00_build_taxonomy", {"out_dir": str(tmp_path / "data")}, run_dir=tmp_path, progress=False
    )
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    assert manifest["counts"]["min_questions_per_concept"] >= 50
    # what the cells printed, whole (the kernel may send one print in several stream messages)
    printed = "".join(
        "".join(o.get("text", ""))
        for c in json.loads(out.read_text())["cells"]
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    )
    assert "identical to the shipped data/: True" in printed


def test_enumerated_parameters_are_checked_before_running():
    with pytest.raises(
        ConfigError, match="parameter 'detector' got 'refused_phrse'; choose from: refused_phrase"
    ):
        validate_parameters(find_notebook("01_select_abstention"), {"detector": "refused_phrse"})
    with pytest.raises(ConfigError, match="parameter 'techniques' got 'telepathy'"):
        validate_parameters(
            find_notebook("01_select_abstention"), {"techniques": ["base", "telepathy"]}
        )
    with pytest.raises(ConfigError, match="parameter 'prompts' got 'papers'"):
        validate_parameters(find_notebook("04_unknown_concepts"), {"prompts": "papers"})
    validate_parameters(
        find_notebook("01_select_abstention"),
        {"detector": "refused_unknownbench", "aggregate": "select"},
    )
    # SELECT's preset asks SELECT's prompt templates of the benchmark: the shipped WordNet one
    # lacks them, which the kernel found only after the grid began
    with pytest.raises(ConfigError, match="needs SELECT's protocol text"):
        validate_parameters(find_notebook("01_select_abstention"), {"preset": "select"})


def test_every_notebook_default_is_a_valid_choice():
    from workbench.cli.experiments import ALL_NOTEBOOKS

    for name in ALL_NOTEBOOKS:
        defaults = {p.name: p.default for p in notebook_parameters(name).values()}
        validate_parameters(find_notebook(name), defaults)


def test_every_notebook_and_its_script_hold_the_same_cells_and_no_outputs():
    import json

    from workbench.cli.experiments import ALL_NOTEBOOKS
    from workbench.notebooks import load_notebook, notebooks_dir

    for name in ALL_NOTEBOOKS:
        load_notebook(name)  # raises when the pair is out of step
        nb = json.loads((notebooks_dir() / f"{name}.ipynb").read_text())
        assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), name


def test_a_jupyterlab_edit_and_the_runner_use_the_same_source(tmp_path):
    """JupyterLab with jupytext saves through jupytext's contents manager: both files change,
    and the runner sees the edit; an .ipynb edited alone is refused, not silently run."""
    import shutil

    import jupytext
    import nbformat
    from jupytext import TextFileContentsManager

    from workbench.notebooks import notebooks_dir, paired_source

    # the folder as `make lab` serves it: jupytext's contents manager looks for its
    # configuration only inside the served folder (once it sat above, and saving wrote the
    # .ipynb alone)
    served = tmp_path / "notebooks"
    shutil.copytree(notebooks_dir(), served, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    tmp_path = served
    cm = TextFileContentsManager(root_dir=str(served))
    model = cm.get("00_quickstart.ipynb")
    nb = model["content"]
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source = cell.source.replace("max_new_tokens = 48", "max_new_tokens = 7")
    cm.save({"type": "notebook", "content": nb}, "00_quickstart.ipynb")
    nb_path = tmp_path / "00_quickstart.ipynb"
    assert "max_new_tokens = 7" in paired_source(nb_path).read_text()
    assert notebook_parameters(nb_path)["max_new_tokens"].default == 7
    # edited without jupytext: only the .ipynb changes, and the runner says so
    raw = nbformat.read(str(nb_path), as_version=4)
    next(c for c in raw.cells if "parameters" in c.metadata.get("tags", [])).source += "\nextra = 1"
    nbformat.write(raw, str(nb_path))
    with pytest.raises(ConfigError, match="hold different cells .*jupytext --sync"):
        notebook_parameters(nb_path)
    assert jupytext  # the library behind both


def test_every_notebook_parameter_has_help_text():
    from workbench.notebooks import notebook_parameters

    for nb in sorted((repo_root() / "notebooks").glob("*.ipynb")):
        missing = [p.name for p in notebook_parameters(nb).values() if not p.help]
        assert not missing, f"{nb.name}: parameters without a help comment: {missing}"


def test_saving_a_notebook_writes_its_source_unchanged():
    """JupyterLab's save goes through jupytext with the project's configuration: it must write
    the committed source back, with no jupytext version header that would dirty the checkout."""
    import jupytext
    from jupytext.config import load_jupytext_configuration_file

    config = load_jupytext_configuration_file(str(repo_root() / "notebooks" / "jupytext.toml"))
    for nb_path in sorted((repo_root() / "notebooks").glob("*.ipynb")):
        nb = jupytext.read(str(nb_path))
        nb.metadata["jupytext"] = {
            "text_representation": {
                "extension": ".py",
                "format_name": "percent",
                "jupytext_version": "0.0.1",
            }
        }
        written = jupytext.writes(
            nb, fmt={"extension": ".py", "format_name": "percent"}, config=config
        )
        assert written == (repo_root() / "notebooks" / "src" / f"{nb_path.stem}.py").read_text(), (
            nb_path.name
        )


def test_papermill_reads_every_parameters_cell(tmp_path, caplog):
    """papermill parses the parameters cell again when it injects values, line by line: a line
    with a second ``=`` (in a help comment or a string) is skipped with "Unable to parse line N"
    and its parameter is lost to it. Every notebook's parameters cell reads the same to
    papermill as to the runner, without a warning."""
    import logging

    import nbformat
    import papermill

    from workbench.notebooks import load_notebook

    for nb in sorted((repo_root() / "notebooks").glob("*.ipynb")):
        source = tmp_path / nb.name
        nbformat.write(load_notebook(nb), str(source))  # what run_notebook hands papermill
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="papermill"):
            found = papermill.inspect_notebook(str(source))
        assert [r.getMessage() for r in caplog.records] == [], nb.name
        assert list(found) == list(notebook_parameters(nb)), nb.name


@pytest.mark.notebook
def test_the_runner_prints_no_kernel_warning(tmp_path, capfd):
    """A notebook run through the runner prints no warning a user cannot act on: the kernel's
    messages are encrypted (ipykernel warns on each start of an unencrypted TCP kernel) and
    papermill reads the parameters it is given."""
    import json

    import nbformat

    from workbench.notebooks import kernel_config, kernel_name, run_notebook

    assert kernel_config().KernelManager.transport_encryption == "auto"
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('greeting = "hello"  # what to print')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("print(greeting)")]
    nb.metadata["kernelspec"] = {"name": kernel_name(), "display_name": "k", "language": "python"}
    nbformat.write(nb, str(tmp_path / "tiny.ipynb"))
    capfd.readouterr()
    out = run_notebook(
        tmp_path / "tiny.ipynb", {"greeting": "hi"}, run_dir=tmp_path / "run", progress=False
    )
    printed = capfd.readouterr()
    text = printed.out + printed.err
    assert "WARNING" not in text and "without encryption" not in text, text
    cells = json.loads(out.read_text())["cells"]
    assert cells[-1]["outputs"][0]["text"] == ["hi\n"]


def test_the_notebook_check_names_a_line_papermill_cannot_parse():
    import sys

    import nbformat

    sys.path.insert(0, str(repo_root() / "scripts"))
    from check_notebooks import papermill_warnings

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('n = 3  # questions\nmode = "a"  # a = the first')
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell]
    assert papermill_warnings(nb) == ["Unable to parse line 2 'mode = \"a\"  # a = the first'."]
    cell.source = 'n = 3  # questions\nmode = "a"  # a: the first'
    assert papermill_warnings(nb) == []


def test_the_quickstart_ends_pointing_to_what_next():
    """Its last cell names the next steps: every other notebook by a name that exists, and
    commands the command line has."""
    import re

    from workbench.cli import main
    from workbench.notebooks import load_notebook

    last = load_notebook("00_quickstart").cells[-1]
    assert last.cell_type == "markdown" and last.source.startswith("## What next")
    named = set(re.findall(r"`(\d\d_[a-z_]+)`", last.source))
    existing = {p.stem for p in (repo_root() / "notebooks").glob("*.ipynb")}
    assert named == existing - {"00_quickstart"}
    for command in re.findall(r"python -m workbench (\w+)", last.source):
        with pytest.raises(SystemExit) as exit:
            main([command, "--help"])
        assert exit.value.code == 0, command


def test_other_parameters_never_write_over_the_default_run(tmp_path, monkeypatch):
    """A run with parameters other than the defaults (and no run_name) gets a run of its own;
    a count out of range is one line before any kernel starts (n_target=-1 once failed inside
    the kernel after an 86-line traceback, over the default run's executed notebook)."""
    import nbformat
    import papermill

    from workbench import notebooks

    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(
        'run_name = "demo"  # results go to runs/<run_name>/\n'
        "n_target = 4  # questions\n"
        "export_figures = False  # also copy the figures"
    )
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("print(n_target)")]
    nbformat.write(nb, str(tmp_path / "tiny.ipynb"))
    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    ran = []
    monkeypatch.setattr(
        papermill,
        "execute_notebook",
        lambda src, out, parameters, **kw: ran.append((out, parameters)),
    )

    def run(**p):
        return notebooks.run_notebook(tmp_path / "tiny.ipynb", p, progress=False)

    default = run()
    assert default.parent.name == "demo"
    assert run(export_figures=True) == default  # where figures go is not another run
    other = run(n_target=5)
    assert other.parent.name.startswith("demo-") and other != default
    assert ran[-1][1]["run_name"] == other.parent.name  # the notebook writes there too
    assert run(n_target=5) == other  # the same parameters: the same run, resumable
    assert run(n_target=5, run_name="mine").parent.name == "mine"
    n = len(ran)
    with pytest.raises(ConfigError, match="parameter 'n_target' must be a non-negative integer"):
        run(n_target=-1)
    assert len(ran) == n


def test_a_kernel_spec_loses_its_debugger_and_the_project_kernel_has_none(tmp_path, monkeypatch):
    """A kernel whose spec declares a debugger showed "idle" in JupyterLab for the whole of a
    long cell (its debug requests' status messages); the set-up turns it off for the project's
    kernel."""
    import json

    from jupyter_client.kernelspec import KernelSpecManager

    from workbench.notebooks import KERNEL_NAME, kernel_name, without_debugger

    spec = tmp_path / "kernels" / "probe" / "kernel.json"
    spec.parent.mkdir(parents=True)
    spec.write_text(
        json.dumps(
            {
                "argv": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "probe",
                "language": "python",
                "metadata": {"debugger": True, "supported_encryption": ["curve"]},
            }
        )
    )
    with monkeypatch.context() as m:
        m.setenv("JUPYTER_PATH", str(tmp_path))
        assert without_debugger("probe") == spec
        assert json.loads(spec.read_text())["metadata"] == {
            "debugger": False,
            "supported_encryption": ["curve"],
        }
    if kernel_name() == KERNEL_NAME:  # registered by the set-up
        assert KernelSpecManager().get_kernel_spec(KERNEL_NAME).metadata["debugger"] is False
