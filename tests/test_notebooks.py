"""Notebooks run headless through the runner; bad parameters fail before any cell runs."""

import pandas as pd
import pytest

from workbench.errors import ConfigError
from workbench.notebooks import (find_notebook, notebook_parameters, parse_parameter,
                                 validate_parameters)


def test_every_notebook_has_a_literal_parameters_cell():
    from workbench.__main__ import ALL_NOTEBOOKS

    for name in ALL_NOTEBOOKS:
        params = notebook_parameters(name)
        assert params, name


def test_unknown_parameter_is_rejected_naming_it():
    with pytest.raises(ConfigError, match="no parameter 'max_tokens'.*max_new_tokens"):
        validate_parameters(find_notebook("00_quickstart"), {"max_tokens": 3})


def test_wrongly_typed_parameter_is_rejected():
    with pytest.raises(ConfigError, match="'max_new_tokens' expects int"):
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
    from workbench.notebooks import run_notebook
    from workbench.paths import repo_root

    run_name = f"test-quickstart-{tmp_path.name}"
    out = run_notebook("00_quickstart", {"questions": ["Name a river.", "Name a mountain."],
                                         "max_new_tokens": 8, "run_name": run_name},
                       run_dir=tmp_path, progress=False)
    assert out.is_file()
    table = pd.read_csv(repo_root() / "runs" / run_name / "answers.csv")
    assert list(table["prompt"]) == ["Name a river.", "Name a mountain."]
    assert (table["n_tokens"] <= 8).all() and table["response"].str.len().gt(0).all()
    assert (repo_root() / "figures" / f"{run_name}_answer_lengths.png").is_file()
    (repo_root() / "figures" / f"{run_name}_answer_lengths.png").unlink()
    (repo_root() / "figures" / f"{run_name}_answer_lengths.pdf").unlink()


@pytest.mark.notebook
def test_build_taxonomy_notebook_reproduces_the_shipped_data(tmp_path):
    import json

    from workbench.notebooks import run_notebook
    from workbench.taxonomy.wordnet import find_wordnet_dir
    from workbench.errors import WorkbenchError

    try:
        find_wordnet_dir()
    except WorkbenchError as e:
        pytest.skip(str(e))
    out = run_notebook("00_build_taxonomy", {"out_dir": str(tmp_path / "data")}, run_dir=tmp_path,
                       progress=False)
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    assert manifest["counts"]["min_questions_per_concept"] >= 50
    text = out.read_text()
    assert "identical to the shipped data/: True" in text


def test_enumerated_parameters_are_checked_before_running():
    with pytest.raises(ConfigError, match="parameter 'detector' got 'refused_phrse'; choose from: refused_phrase"):
        validate_parameters(find_notebook("01_select_abstention"), {"detector": "refused_phrse"})
    with pytest.raises(ConfigError, match="parameter 'techniques' got 'telepathy'"):
        validate_parameters(find_notebook("01_select_abstention"), {"techniques": ["base", "telepathy"]})
    with pytest.raises(ConfigError, match="parameter 'prompts' got 'papers'"):
        validate_parameters(find_notebook("04_unknown_concepts"), {"prompts": "papers"})
    validate_parameters(find_notebook("01_select_abstention"), {"detector": "refused_unknownbench",
                                                                "preset": "select"})


def test_every_notebook_default_is_a_valid_choice():
    from workbench.__main__ import ALL_NOTEBOOKS

    for name in ALL_NOTEBOOKS:
        defaults = {p.name: p.default for p in notebook_parameters(name).values()}
        validate_parameters(find_notebook(name), defaults)
