"""Real JupyterLab in headless Chromium: labelling answers as a person does.

Opens notebook 07 on a small run's answers (a fixture run directory with an answer of each of
the notebook's default techniques) in a 1,400 x 1,000 window, runs it, labels answers by
clicking and by typing keys, checks the labels file, the labels as they stand beside it and the
agreement table, and the layout (the agreement table in view with the answers, the cards'
buttons on one line, no answer in an inner scroll box). Then the kernel restarts: the dead
labeller says so and takes no clicks. The notebook is saved and opened again: a note says how to
get the labeller back, no "model not found" shows and no stored output claims a label count. Run
All brings the labels back, labelling goes on where it stopped, and the agreement table counts
the new label. Screenshots go to ``runs/browser_test/labeller-*`` (docs/notebooks-in-use.md
shows them).
"""

import json
import time

import pandas as pd
import pytest

from lab_server import accept_dialog, jupyter_lab, notebook_page, open_notebook
from test_browser import ARTIFACTS, CHROMIUM, ROOT, _log_console_text, _wait_text, needs_chromium
from test_labeller import QUESTIONS, answer_rows
from workbench.scoring.labels import read_label_records

pytestmark = [pytest.mark.browser, pytest.mark.integration]
NOTEBOOK = "07_label_answers.ipynb"


def default_techniques() -> list[str]:
    """The techniques notebook 07 makes answers of at its defaults."""
    from workbench.notebooks import notebook_parameters

    return list(notebook_parameters(NOTEBOOK.removesuffix(".ipynb"))["techniques"].default)


def answers_at_the_defaults() -> pd.DataFrame:
    """The fixture run's answers for each of the notebook's default techniques, in the order
    the fixture gives them (base, steering, few-shot CoT) and the others after: what the
    labeller shows at its defaults, one card per technique."""
    rows = answer_rows()
    extra = [t for t in default_techniques() if t not in set(rows["technique"])]
    more = []
    for t in extra:
        copy = rows[rows["technique"] == "base"].copy()
        copy["technique"] = t
        copy["response"] = [
            f"Rivers carry water to a sea, a lake or another river; the Nile ends in the "
            f"Mediterranean. ({i})"
            for i in copy["question_index"]
        ]
        more.append(copy)
    return pd.concat([rows, *more], ignore_index=True)


N_ANSWERS = len(QUESTIONS) * len(default_techniques())


@pytest.fixture
def lab_on_run(tmp_path):
    """JupyterLab serving a copy of notebook 07 whose ``run_dir`` is a fixture run."""
    run = tmp_path / "run"
    run.mkdir()
    answers_at_the_defaults().to_parquet(run / "results.parquet")
    (tmp_path / "root").mkdir()
    nb = json.loads((ROOT / "notebooks" / NOTEBOOK).read_text())
    params = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
    params["source"] = [
        f"run_dir = {str(run)!r}\n" if line.startswith("run_dir =") else line
        for line in params["source"]
    ]
    (tmp_path / "root" / NOTEBOOK).write_text(json.dumps(nb))
    with jupyter_lab(
        tmp_path / "root", tmp_path, env={"WORKBENCH_RUNS": str(tmp_path / "runs")}
    ) as (url, token, log):
        yield url, token, log, run / "labels.jsonl"


def _labels(path) -> dict[tuple[int, str], str]:
    """(question number, technique) -> label, from the file on disk."""
    number = {q: i for i, (q, *_rest) in enumerate(QUESTIONS)}
    return {(number[r["question"]], r["technique"]): r["label"] for r in read_label_records(path)}


def _wait_visible(locator, timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    while not locator.first.is_visible():
        if time.time() > deadline:
            raise AssertionError(f"{locator} not visible within {timeout_s:.0f} s")
        time.sleep(0.5)


def _agreement_row(widget, detector: str) -> list[str]:
    row = widget.locator(".wb-agreement tr", has=widget.page.locator(f"td:text-is('{detector}')"))
    return row.locator("td").all_inner_texts()


@needs_chromium
def test_labelling_by_click_and_key_survives_a_kernel_restart(lab_on_run):
    url, token, lab_log, labels_file = lab_on_run
    shot = lambda page, step: page.screenshot(
        path=str(ARTIFACTS / f"labeller-{step}.png"), full_page=True
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with notebook_page(url, token, NOTEBOOK, CHROMIUM, ARTIFACTS / "labeller-final.png") as page:
        widget = page.locator(".wb-labeller")
        widget.wait_for(timeout=180_000)
        status = widget.locator(".wb-status")
        _wait_text(status, rf"0 of {N_ANSWERS} answers labelled", 30)
        assert "question 1 of 3" in widget.locator(".wb-question").inner_text()
        cards = widget.locator(".wb-answer")
        assert cards.count() == len(default_techniques())  # side by side, at the defaults
        shot(page, "1-ready")

        # by clicking: the first two answers
        cards.nth(0).get_by_role("button", name="compliance (c)").click()
        _wait_text(status, rf"1 of {N_ANSWERS} answers labelled", 30)
        cards.nth(1).get_by_role("button", name="refusal (r)").click()
        _wait_text(status, rf"2 of {N_ANSWERS} answers labelled", 30)
        assert "label: refusal" in cards.nth(1).inner_text()
        # by keyboard: the third and fourth answers (the highlight moves on from the click),
        # then the next question's first two
        keys = widget.get_by_placeholder("keys: click here")
        keys.click()
        page.keyboard.type("pccr")
        _wait_text(status, rf"6 of {N_ANSWERS} answers labelled", 30)
        _wait_text(widget.locator(".wb-question"), r"question 2 of 3", 30)
        assert _labels(labels_file) == {
            (0, "base"): "compliance",
            (0, "steering"): "refusal",
            (0, "few_shot_cot"): "partial",
            (0, "zero_shot"): "compliance",
            (1, "base"): "compliance",
            (1, "steering"): "refusal",
        }
        page.keyboard.press("b")
        _wait_text(widget.locator(".wb-question"), r"question 1 of 3", 30)
        assert "label: partial" in cards.nth(2).inner_text()
        # the agreement table: phrase (stored decisions) agrees on all six, keyword misses the partial
        _wait_text(widget.locator(".wb-agreement"), r"phrase\s+6\s+1\.00", 30)
        assert _agreement_row(widget, "keyword")[:3] == ["keyword", "6", "0.83"]
        assert _agreement_row(widget, "judge")[:2] == ["judge", "6"]
        # the keys box shows the last key, not every key typed
        assert keys.evaluate("e => getComputedStyle(e).color") == "rgba(0, 0, 0, 0)"
        assert "key: b" in widget.inner_text()
        # the labels as they stand, beside the log (which also holds the superseded ones)
        assert "labels.current.csv" in status.inner_text()
        assert len(pd.read_csv(labels_file.with_name("labels.current.csv"))) == 6
        # layout: the whole labeller, agreement table included, fits in the window
        widget.scroll_into_view_if_needed()
        page.evaluate("document.querySelector('.wb-labeller').scrollIntoView()")
        box = widget.bounding_box()
        table = widget.locator(".wb-agreement").bounding_box()
        (ARTIFACTS / "labeller-layout.json").write_text(
            json.dumps({"labeller": box, "agreement": table})
        )
        assert box["y"] + box["height"] <= 1000, box  # the whole labeller in the window
        assert table["y"] + table["height"] <= 1000, (box, table)
        scrolled = widget.locator(".wb-response").evaluate_all(
            "els => els.filter(e => e.scrollHeight > e.clientHeight + 1).length"
        )
        assert scrolled == 0  # every answer readable whole, without an inner scroll bar
        tops = {round(c.get_by_role("button").first.bounding_box()["y"]) for c in cards.all()}
        assert max(tops) - min(tops) <= 2, (
            tops
        )  # every card's buttons on one line (a focused card's border is 1 px wider)
        shot(page, "2-labelled")

        # the kernel restarts: the labeller says it needs the kernel, and takes no click
        page.get_by_role("menuitem", name="Kernel").click()
        page.get_by_text("Restart Kernel…", exact=True).click()
        page.locator(".jp-Dialog .jp-mod-accept").click()
        note = page.locator(".wb-kernel-note")
        _wait_visible(note, 60)
        assert "run this cell" in note.inner_text()
        assert "wb-live" in widget.get_attribute("class")
        assert "jupyter-widgets-disconnected" in widget.get_attribute("class")
        cards.nth(0).get_by_role("button", name="refusal (r)").click(force=True)
        page.wait_for_timeout(1000)
        assert len(read_label_records(labels_file)) == 6  # nothing happened, nothing lost
        shot(page, "3-kernel-restarted")

        # saved and opened again: the note, no "model not found", no stale count
        page.keyboard.press("Control+s")
        page.wait_for_timeout(2000)
        open_notebook(page, url, token, NOTEBOOK)
        note = page.locator(".wb-kernel-note")
        _wait_visible(note, 60)
        assert not page.get_by_text("model not found").first.is_visible()
        outputs = " ".join(page.locator(".jp-OutputArea-output").all_inner_texts())
        assert "no labels yet" not in outputs and f"of {N_ANSWERS} answers labelled" not in outputs
        note.first.scroll_into_view_if_needed()
        shot(page, "4-reopened")

        # the kernel dies (restart), everything runs again: labels are back
        page.get_by_role("menuitem", name="Kernel").click()
        page.get_by_text("Restart Kernel and Run All Cells…", exact=True).click()
        accept_dialog(page)
        _wait_text(page.locator(".wb-labeller .wb-status"), r"restored 6 labels", 180)
        assert not page.locator(".wb-kernel-note").first.is_visible()  # alive: no note
        widget = page.locator(".wb-labeller")
        status = widget.locator(".wb-status")
        assert f"6 of {N_ANSWERS} answers labelled" in status.inner_text()
        question = widget.locator(".wb-question")
        assert "question 2 of 3" in question.inner_text()  # where labelling stopped
        cards = widget.locator(".wb-answer")
        assert (
            "label: compliance" in cards.nth(0).inner_text()
            and "not labelled" in cards.nth(2).inner_text()
        )
        assert _agreement_row(widget, "phrase")[:3] == ["phrase", "6", "1.00"]
        # the last cell: the labels file scored with the current rules, as the command does
        last = page.locator(".jp-Notebook .jp-Cell").last.locator(".jp-OutputArea")
        _wait_text(last, r"6 labelled answers in labels\.jsonl[\s\S]*phrase\s+6", 60)
        shot(page, "5-restored")

        # labelling goes on: one more by key, and the table counts it
        widget.get_by_placeholder("keys: click here").click()
        page.keyboard.press("p")
        _wait_text(status, rf"7 of {N_ANSWERS} answers labelled", 30)
        _wait_text(widget.locator(".wb-agreement"), r"phrase\s+7\s+1\.00", 30)
        assert _agreement_row(widget, "keyword")[:3] == ["keyword", "7", "0.71"]
        assert _labels(labels_file)[(1, "few_shot_cot")] == "partial"
        shot(page, "6-after-restart")

        log = _log_console_text(page)
        stderr = page.locator(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
        ).all_inner_texts()
    assert "Traceback" not in log and "No log messages" in log, log
    assert not any("Traceback" in t for t in stderr), stderr
    assert "Traceback" not in lab_log.read_text()
    assert len(read_label_records(labels_file)) == 7
