"""Tables of measured numbers are generated from their runs' records and cannot drift."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from workbench.cli import demo
from workbench.errors import WorkbenchError
from workbench.tables import measured


def test_every_generated_table_equals_its_record():
    assert measured.stale() == []


def test_every_table_is_on_a_page_and_the_readme_has_the_main_result():
    names = {
        m["name"] for page in measured.pages() for m in measured.BLOCK.finditer(page.read_text())
    }
    assert names == set(measured.TABLES)
    readme = (measured.repo_root() / "README.md").read_text()
    block = next(m for m in measured.BLOCK.finditer(readme) if m["name"] == "demo-techniques")
    assert "| steering |" in block["body"] and "*Measured by `make demo` on " in block["body"]


def test_a_number_edited_by_hand_is_caught(tmp_path):
    readme = (measured.repo_root() / "README.md").read_text()
    m = next(m for m in measured.BLOCK.finditer(readme) if m["name"] == "demo-techniques")
    page = tmp_path / "page.md"
    page.write_text(m.group(0).replace("| steering | ", "| steering | 0.99 | ", 1))
    assert measured.stale([page]) == [f"{page}: demo-techniques"]
    assert measured.fill_pages([page]) == [page]
    assert measured.stale([page]) == []


def test_an_unknown_table_name_is_one_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- measured: nope -->\n<!-- /measured -->\n")
    with pytest.raises(WorkbenchError, match="unknown measured table 'nope'"):
        measured.stale([page])


def _two_blocks() -> str:
    """The README: prose between measured blocks, as the real pages have it."""
    return (measured.repo_root() / "README.md").read_text()


@pytest.mark.parametrize(
    "break_it, words",
    [
        (lambda t: t.replace(measured.CLOSE, "", 1), "has no <!-- /measured --> before"),
        (lambda t: t[: t.rindex(measured.CLOSE)], "has no <!-- /measured -->; nothing"),
        (lambda t: "intro\n" + measured.CLOSE + "\n" + t, ":2: <!-- /measured --> closes no"),
    ],
    ids=["end marker deleted", "last end marker deleted", "a stray end marker"],
)
def test_markers_that_do_not_pair_change_no_page(tmp_path, break_it, words):
    """A block without its end marker once swallowed the prose up to the next block's end;
    now every page is checked first, and the one that does not pair is named with its line."""
    good, bad = tmp_path / "good.md", tmp_path / "bad.md"
    text = _two_blocks().replace("| steering | ", "| steering | 0.99 | ", 1)  # stale: would fill
    good.write_text(text)
    bad.write_text(break_it(text))
    before = {p: p.read_text() for p in (good, bad)}
    for run in (lambda: measured.fill_pages([good, bad]), lambda: measured.stale([bad])):
        with pytest.raises(WorkbenchError, match=words) as e:
            run()
        assert str(bad) in str(e.value) and "\n" not in str(e.value)
    assert {p: p.read_text() for p in (good, bad)} == before  # nothing written, good page too


def fake_run(tmp_path, techniques: list[dict], numerics: str = "reproducible"):
    run = tmp_path / "demo"
    run.mkdir()
    pd.DataFrame(techniques).to_csv(run / "techniques.csv", index=False)
    dtype = "float32" if numerics == "reproducible" else "bfloat16"
    pd.DataFrame({"dtype": [dtype], "numerics": [numerics]}).to_parquet(run / "results.parquet")
    return run


def test_a_demo_that_reproduces_the_record_writes_nothing(tmp_path):
    record = measured.repo_root() / demo.RECORD
    before = record.read_bytes()
    techniques = json.loads(before)["techniques"]
    run = fake_run(tmp_path, techniques)
    figures = demo.figure_hashes()
    out = demo.compare_and_record(run, 1.0, figures, pages=[])
    assert out.changes == [] and out.figures_changed == []
    assert record.read_bytes() == before
    assert out.text().startswith("results equal the recorded ones")


def test_a_demo_that_differs_names_each_number_and_rewrites_its_record(tmp_path):
    record = tmp_path / "demo.json"
    techniques = json.loads((measured.repo_root() / demo.RECORD).read_text())["techniques"]
    record.write_text(json.dumps({"techniques": techniques, "machine": {"cpu": "elsewhere"}}))
    changed = [dict(t) for t in techniques]
    steering = next(t for t in changed if t["technique"] == "steering")
    old = steering["abstention"]
    steering["abstention"] = round(old - 0.05, 4)
    run = fake_run(tmp_path, changed, numerics="fast")
    figures = dict.fromkeys(demo.figure_hashes(), "another hash")
    out = demo.compare_and_record(run, 1.0, figures, record=record, pages=[])
    assert out.changes == [f"steering abstention {old} -> {steering['abstention']}"]
    assert json.loads(record.read_text())["techniques"] == demo.techniques_record(
        pd.read_csv(run / "techniques.csv")
    )
    text = out.text()
    assert "steering abstention" in text and "speed-first numerics" in text
    assert "select_atomic_techniques.png" in text


def test_the_steering_table_gives_the_paired_rounds_median(monkeypatch):
    """Unsteered speed on the steering engine against the plain one, round by round: the
    median of the paired rounds (not their mean, not the first round) and their range."""
    row = {"steered_tps": None, "ratio": None, "same": 64, "same_unsteered": 64}
    rec = {
        "prompts": 64,
        "max_new_tokens": 48,
        "concept": "wn:1",
        "fired": 20,
        "repeats": 3,
        "command": "python benchmarks/steering.py --record",
        "machine": json.loads((measured.repo_root() / "docs/results/steering.json").read_text())[
            "machine"
        ],
        "paths": [
            {**row, "path": "vLLM compiled plain", "unsteered_tps": 100.0, "group": ["a", "b"]},
            {
                **row,
                "path": "vLLM compiled steering",
                "unsteered_tps": 98.0,
                "group": ["a", "b"],
                "unsteered_vs_plain_rounds": [1.2, 0.9, 1.0],
            },
        ],
    }
    monkeypatch.setattr(measured, "read_record", lambda path: rec)
    text = measured.steering_speed()
    assert "ran at 1.00x the plain engine's speed (median of 3 paired rounds, 0.90x-1.20x)" in text
    assert "each round's first engine the other round's last" in text


def test_a_steered_pass_s_extra_time_is_split_by_engine_step(monkeypatch):
    """The steering steps table: per round the steered pass minus the unsteered pass of the
    same round (first step, second step, steps more at a decoding step's time, the rest),
    the median over rounds; rows without steps of both kinds (the server's) are left out."""
    # per pass: [steps, first step s, second step s, decoding step median s, sum s]
    un = [[48, 0.5, 0.1, 0.1, 5.3], [48, 0.6, 0.1, 0.1, 5.5], [48, 0.5, 0.1, 0.12, 5.4]]
    st = [[49, 0.6, 0.2, 0.1, 5.7], [49, 0.7, 0.3, 0.1, 5.9], [49, 0.6, 0.2, 0.1, 6.2]]
    costs = measured.steered_step_costs({"steps": {"unsteered": un, "steered": st}})
    assert costs is not None
    assert costs["steps"] == (48, 49)
    assert costs["gate_s"] == pytest.approx(0.1)
    assert costs["restart_s"] == pytest.approx(0.1)  # median of 0.1, 0.2, 0.1
    assert costs["more_s"] == pytest.approx(0.1)  # one step more at the median decoding step
    assert costs["extra_s"] == pytest.approx(0.4)  # median of 0.4, 0.4, 0.8: not of the sums
    assert costs["rest_s"] == pytest.approx(0.1)
    assert costs["unsteered_s"] == pytest.approx(5.4)
    assert measured.steered_step_costs({"steps": {"unsteered": un}}) is None
    assert measured.steered_step_costs({}) is None
    rec = json.loads((measured.repo_root() / "docs/results/steering.json").read_text())
    rec["repeats"] = 3
    rec["paths"] = [
        {"path": "vLLM compiled steering", "steps": {"unsteered": un, "steered": st}},
        {"path": "vLLM server, eager (64 in flight)"},
    ]
    monkeypatch.setattr(measured, "read_record", lambda path: rec)
    text = measured.steering_steps()
    assert "| vLLM compiled steering | 48 / 49 | 5.40 s | +0.40 s (+7.4%) | +0.10 s |" in text
    assert "server" not in text.split("\n\n")[0]
    assert "median over the 3 rounds" in text
