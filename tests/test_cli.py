"""The command line prints one clear line for bad input."""

import subprocess
import sys

import pytest


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], capture_output=True, text=True, timeout=120
    )


def test_unknown_model_is_one_error_line():
    r = _run("generate", "--model", "no-such-model", "hello")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown model 'no-such-model'")


def test_bad_model_path_is_one_error_line(tmp_path):
    r = _run("generate", "--model", str(tmp_path), "hello")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"error: {tmp_path} is not a model directory: it has no config.json"
    ]


def test_wrong_notebook_parameter_is_one_error_line():
    r = _run("run", "00_quickstart", "-p", "max_tokens=4")
    assert r.returncode == 2
    assert r.stderr.strip().startswith(
        "error: notebook 00_quickstart has no parameter 'max_tokens'"
    )


def test_models_lists_the_embedded_default():
    r = _run("models")
    assert r.returncode == 0 and "smollm2-135m-instruct" in r.stdout


# -- one command line: every command reachable, every --help light ---------------------------

HEAVY = ("torch", "transformers", "pandas", "numpy", "vllm", "peft", "matplotlib")


def test_every_command_is_reachable_from_help_and_no_help_imports_a_model_library():
    """Walk the parser from ``python -m workbench --help`` down to every subcommand in one fresh
    process: each ``--help`` prints usage and exits 0, and none of them imports torch, pandas or
    another heavy library (what keeps each one under a second: benchmarks/cli_help.py)."""
    script = """
import argparse, contextlib, io, json, sys
from workbench.cli import build_parser

def walk(parser, path):
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, path + [name])

paths = list(walk(build_parser(), []))
codes = {}
for path in paths:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            build_parser().parse_args(path + ["--help"])
        except SystemExit as e:
            codes[" ".join(path)] = (e.code, out.getvalue().startswith("usage:"))
heavy = sorted(m for m in HEAVY if m in sys.modules)
print(json.dumps({"codes": codes, "heavy": heavy}))
""".replace("HEAVY", repr(HEAVY))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    import json

    got = json.loads(r.stdout)
    assert got["heavy"] == [], f"--help imported {got['heavy']}"
    assert all(code == [0, True] for code in got["codes"].values()), got["codes"]
    commands = set(got["codes"])
    for expected in (
        "demo",
        "grid",
        "run",
        "verify",
        "tables",
        "serve",
        "taxonomy import-select",
        "releases check",
        "import-select-results",
        "unknown build",
        "unknown score-outputs",
        "scoring agreement",
        "scoring labels",
    ):
        assert expected in commands, f"{expected!r} not reachable from --help: {sorted(commands)}"


def test_the_old_module_command_lines_are_gone_and_the_docs_use_the_one_command():
    """``python -m workbench <command>`` is the one command line: no package keeps a
    ``__main__`` of its own, and no page, notebook or script shows an old ``-m workbench.X``
    form (the Jupyter extension's set-up switch is not a command)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    mains = sorted(str(p.relative_to(root)) for p in (root / "workbench").rglob("__main__.py"))
    assert mains == ["workbench/__main__.py"]
    old = re.compile(r"-m workbench\.(?!lab_extension)[a-z_.]+")
    # docs/cli.md maps the earlier forms to the commands: the one page that names them
    pages = [p for p in (root / "docs").glob("*.md") if p.name != "cli.md"]
    texts = [root / "README.md", root / "Makefile", *pages]
    texts += [*(root / "notebooks" / "src").glob("*.py"), *(root / "scripts").glob("*")]
    texts += [*(root / "benchmarks").glob("*.py"), *(root / "workbench").rglob("*.py")]
    found = [
        f"{p.relative_to(root)}: {m.group(0)}"
        for p in texts
        if p.is_file()
        for m in old.finditer(p.read_text(errors="replace"))
    ]
    assert not found, found


# -- releases check: every kind, a repository's root or its data folder, --allow-partial -----


def test_releases_check_takes_unknownbenchs_repository_root_or_its_data_folder(tmp_path, capsys):
    from unknown_release import write_unknownbench_release
    from workbench.cli import main

    write_unknownbench_release(tmp_path / "UnknownBench" / "data")
    assert main(["releases", "check", "unknownbench", str(tmp_path / "UnknownBench")]) == 0
    assert capsys.readouterr().out.strip() == "whole"
    assert main(["releases", "check", "unknownbench", str(tmp_path / "UnknownBench" / "data")]) == 0
    assert capsys.readouterr().out.strip() == "whole"
    status = main(["releases", "check", "unknownbench", str(tmp_path / "elsewhere")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1
    assert err[0].startswith("error: no UnknownBench data under ") and "/data" in err[0]


def test_releases_check_accepts_allow_partial_which_its_error_suggests(tmp_path, capsys):
    from unknown_release import write_unknownbench_release
    from workbench.cli import main
    from workbench.releases import published

    counts = {rel: f["items"] for rel, f in published("unknownbench").files.items()}
    counts["NEC/NEC_answerable.json"] = 100
    write_unknownbench_release(tmp_path / "ub", counts)
    assert main(["releases", "check", "unknownbench", str(tmp_path / "ub")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--allow-partial" in err and len(err.splitlines()) == 1
    assert main(["releases", "check", "unknownbench", str(tmp_path / "ub"), "--allow-partial"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("partial: ") and "NEC/NEC_answerable.json has 100 of 2,072" in out


def test_releases_check_knows_selects_results(tmp_path, capsys):
    """SELECT's results are a kind of their own: the readable results files per partition
    against the published 72 + 72 (the fixture release holds a few, one a Git LFS pointer)."""
    from select_results_fixture import write_results_release
    from workbench.cli import main

    fx = write_results_release(tmp_path / "clone")
    n_atoms = sum(1 for p in fx["rows"] if "expr.abstain.select/" in p) + 1  # + the truncated
    assert main(["releases", "check", "select-results", str(fx["root"]), "--allow-partial"]) == 0
    out = capsys.readouterr().out
    assert f"results/expr.abstain.select has {n_atoms} of 72 files" in out
    assert main(["releases", "check", "select-results", str(fx["root"] / "results")]) == 2
    assert "incomplete against the published release" in capsys.readouterr().err


# -- import-select-results: a failed import leaves nothing; absent files said once ---------


def test_a_failed_import_leaves_no_run_folder_and_lists_the_absent_files_once(tmp_path, capsys):
    from select_results_fixture import write_results_release
    from workbench.cli import main
    from workbench.taxonomy import import_select, save_benchmark

    fx = write_results_release(tmp_path / "clone")
    save_benchmark(import_select(fx["root"]), tmp_path / "bench")
    runs = tmp_path / "runs"
    args = ["import-select-results", str(fx["root"]), "--benchmark", str(tmp_path / "bench")]
    args += ["--run", "sel", "--root", str(runs), "--workers", "1"]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert not (runs / "sel").exists()  # no .lock, no chunks/
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "--allow-partial" in err[0]
    for path in fx["absent"]:
        assert captured.out.count(f"absent: {path}\n") == 1
    # with --allow-partial: the import goes on, and its summary lists each absent file once
    assert main([*args, "--allow-partial"]) == 0
    out = capsys.readouterr().out
    for path in fx["absent"]:
        assert out.count(f"absent: {path}\n") == 1
    assert (runs / "sel" / "results.parquet").is_file()


# -- unknown score-outputs: published outputs scored with the paper's rules -----------------


#: UnknownBench's items per task and partition: every model's published answer file holds them
RELEASE_ITEMS = {
    "FalseQA_answerable": 2365,
    "FalseQA_unanswerable": 2365,
    "NEC_answerable": 2072,
    "NEC_unanswerable": 2078,
    "RefuNQ_answerable": 2266,
    "RefuNQ_unanswerable": 2173,
}


def _write_outputs(folder, model: str, replies: dict, stems=tuple(RELEASE_ITEMS)) -> None:
    """A model's output files in the release's shape: JSON Lines with prompt, label, category
    and a field named after the model. ``replies``: file stem -> [(prompt, label, reply)], the
    first lines of that file; each answer file of ``stems`` is filled up to the release's items
    (label 0 / 1, RefuNQ's gold answers or "NEC", an answer that is no refusal)."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    for stem in dict.fromkeys([*stems, *replies]):
        lines = list(replies.get(stem, []))
        if stem in RELEASE_ITEMS:
            task, partition = stem.split("_")
            for i in range(len(lines), RELEASE_ITEMS[stem]):
                label = (
                    ([f"Filler {i}"] if partition == "answerable" else "NEC")
                    if task == "RefuNQ"
                    else int(partition == "unanswerable")
                )
                lines.append((f"Filler question {i}?", label, f"Filler {i} is the answer."))
        (folder / f"{model}_{stem}.json").write_text(
            "".join(
                json.dumps({"prompt": p, "label": lab, "category": "animals", model: r}) + "\n"
                for p, lab, r in lines
            )
        )


def test_score_outputs_reports_the_papers_refusal_and_accuracy_rules(tmp_path, capsys):
    import pandas as pd

    from workbench.cli import main
    from workbench.scoring.keywords import unknownbench_refusal

    replies = {
        "NEC_unanswerable": [
            ("What is a Zorblat?", 1, "I'm sorry, but I don't know what a Zorblat is."),
            ("Where do Plimps live?", 1, "Plimps live in the mountains."),
            ("Is Quonk edible?", 1, "There is no information on Quonk; it may not exist."),
            ("How big is a Vrell?", 1, "A Vrell is about a metre long."),
        ],
        "RefuNQ_answerable": [
            (
                "who wrote hamlet",
                ["William Shakespeare"],
                "Hamlet was written by William Shakespeare.",
            ),
            ("capital of france", ["Paris"], "The capital is Lyon."),
        ],
        "uncertainty_NEC_unanswerable": [
            ("What is a Zorblat?", 1, " [1]"),
            ("Where do Plimps live?", 1, " [4]"),
        ],
    }
    _write_outputs(tmp_path / "outputs" / "acme_responses" / "acme", "acme-chat", replies)
    # the release's derived scores, under the same file names, are not answers
    _write_outputs(
        tmp_path / "outputs" / "unified_confidence_extracted_scores" / "acme", "acme-chat", {}
    )
    out_csv = tmp_path / "scored.csv"
    assert main(["unknown", "score-outputs", str(tmp_path / "outputs"), "--out", str(out_csv)]) == 0
    out = capsys.readouterr().out
    assert "acme-chat: 13319 answers" in out
    rows = pd.read_csv(out_csv)
    assert len(rows) == 13319
    nec = rows[(rows["task"] == "NEC") & (rows["partition"] == "unanswerable")]
    assert nec["refused_unknownbench"].sum() == sum(
        unknownbench_refusal(r) for _, _, r in replies["NEC_unanswerable"]
    )  # the fillers are answers
    line = next(line for line in out.splitlines() if "NEC unanswerable" in line).split()
    assert float(line[3]) == round(nec["refused_unknownbench"].mean(), 3)  # UnknownBench's rule
    refunq = rows[rows["task"] == "RefuNQ"].set_index("prompt")
    assert refunq.loc["who wrote hamlet", "correct_unknownbench"]  # gold substring
    assert not refunq.loc["capital of france", "correct_unknownbench"]
    nec_rows = nec.set_index("prompt")
    assert nec_rows.loc["What is a Zorblat?", "confidence"] == 1.0
    assert pd.isna(nec_rows.loc["Is Quonk edible?", "confidence"])  # no confidence line for it


def test_score_outputs_names_a_malformed_line_and_an_unknown_model(tmp_path, capsys):
    from workbench.cli import main

    _write_outputs(tmp_path / "o", "acme", {"NEC_answerable": [("Q?", 0, "A.")]})
    path = tmp_path / "o" / "acme_NEC_answerable.json"
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = '{"prompt": "Q2?", "label": 0}\n'
    path.write_text("".join(lines))
    assert main(["unknown", "score-outputs", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "acme_NEC_answerable.json, line 2: no reply of 'acme'" in err[0]
    assert main(["unknown", "score-outputs", str(tmp_path / "o"), "--model", "gpt4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: no outputs of model 'gpt4' under {tmp_path / 'o'}; found: acme"


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (
            lambda d: (d / "acme_FalseQA_answerable.json").unlink(),
            "outputs of 'acme' lack acme_FalseQA_answerable.json (the release has all 6)",
        ),
        (
            lambda d: (d / "acme_NEC_unanswerable.json").write_text(
                "".join((d / "acme_NEC_unanswerable.json").read_text().splitlines(True)[:1000])
            ),
            "acme_NEC_unanswerable.json holds 1000 answers where UnknownBench's NEC "
            "unanswerable set has 2078",
        ),
        (
            lambda d: (d / "acme_NEC_answerable.json").write_text(
                (d / "acme_NEC_answerable.json")
                .read_text()
                .replace('"label": 0', '"label": "maybe"', 1)
            ),
            'acme_NEC_answerable.json, line 1: label "maybe" is not 0, 1, "NEC"',
        ),
    ],
)
def test_score_outputs_names_a_partial_or_altered_release(tmp_path, capsys, damage, said):
    """A file missing, cut short or relabelled was scored as a smaller release."""
    from workbench.cli import main

    _write_outputs(tmp_path / "o", "acme", {})
    damage(tmp_path / "o")
    assert main(["unknown", "score-outputs", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and "\n" not in err, err


def test_score_outputs_keeps_a_null_reply_as_an_empty_answer(tmp_path):
    """PaLM's published files hold null replies (its API gave no text); the paper's code keeps
    those rows, neither refusals nor correct. A line without the reply field stays an error."""
    from workbench.unknown.outputs import read_outputs

    _write_outputs(tmp_path / "o", "palm", {"RefuNQ_answerable": [("Who?", ["Ada"], "Ada.")]})
    path = tmp_path / "o" / "palm_RefuNQ_answerable.json"
    path.write_text(path.read_text().replace('"palm": "Ada."', '"palm": null', 1))
    rows = read_outputs([tmp_path / "o"]).set_index("prompt")
    assert len(rows) == 13319 and rows.loc["Who?", "response"] == ""
    assert not rows.loc["Who?", "refused_unknownbench"] and not rows.loc["Who?", "correct"]


def test_score_outputs_reads_a_file_published_twice_once(tmp_path, capsys):
    """UnknownBench's outputs hold mistral's answers in two folders, byte for byte."""
    from workbench.cli import main

    _write_outputs(tmp_path / "o" / "Open-source-LLMs_responses" / "acme", "acme", {})
    _write_outputs(tmp_path / "o" / "copy_responses" / "acme", "acme", {})
    assert main(["unknown", "score-outputs", str(tmp_path / "o")]) == 0
    assert "acme: 13319 answers" in capsys.readouterr().out


def test_the_command_line_page_documents_every_command():
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from cli_help import command_paths

    page = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    leaves = [
        p
        for p in command_paths()
        if p and not any(q[: len(p)] == p and q != p for q in command_paths())
    ]
    missing = [" ".join(p) for p in leaves if f"| `{' '.join(p)}" not in page]
    assert not missing, f"docs/cli.md lacks a row for: {missing}"


def test_taxonomy_find_says_when_nothing_or_more_matches(capsys):
    """No match printed nothing and exited 0; a long list was cut at 20 without a word."""
    from workbench.cli import main

    assert main(["taxonomy", "find", "zzzqqqxx"]) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err.strip() == "no concept's name or id contains 'zzzqqqxx'"
    assert main(["taxonomy", "find", ""]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    more = [line for line in lines if line.startswith("... ")]
    assert more and "more atomic concepts match (--limit " in more[0]
    assert len(lines) <= 2 * 20 + 2
