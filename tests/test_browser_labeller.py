"""Real JupyterLab in headless Chromium: labelling answers as a person does.

Opens notebook 07 on a small run's answers (a fixture run directory), runs it, labels answers by
clicking and by typing keys, checks the labels file and the agreement table, restarts the
kernel and runs everything again: the labels are back, labelling goes on where it stopped, and
the agreement table counts the new label. Screenshots go to ``runs/browser_test/labeller-*``.
"""

import json

import pytest

from lab_server import accept_dialog, jupyter_lab, launch_chromium, open_notebook
from test_browser import ARTIFACTS, CHROMIUM, ROOT, _log_console_text, _wait_text, needs_chromium
from test_labeller import QUESTIONS, answer_rows
from workbench.scoring.labels import read_label_records

pytestmark = [pytest.mark.browser, pytest.mark.integration]
NOTEBOOK = "07_label_answers.ipynb"


@pytest.fixture
def lab_on_run(tmp_path):
    """JupyterLab serving a copy of notebook 07 whose ``run_dir`` is a fixture run."""
    run = tmp_path / "run"
    run.mkdir()
    answer_rows().to_parquet(run / "results.parquet")
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


def _agreement_row(widget, detector: str) -> list[str]:
    row = widget.locator(".wb-agreement tr", has=widget.page.locator(f"td:text-is('{detector}')"))
    return row.locator("td").all_inner_texts()


@needs_chromium
def test_labelling_by_click_and_key_survives_a_kernel_restart(lab_on_run):
    from playwright.sync_api import sync_playwright

    url, token, lab_log, labels_file = lab_on_run
    shot = lambda page, step: page.screenshot(
        path=str(ARTIFACTS / f"labeller-{step}.png"), full_page=True
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = launch_chromium(p, CHROMIUM)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            open_notebook(page, url, token, NOTEBOOK)
            page.get_by_role("menuitem", name="Run").click()
            page.get_by_text("Run All Cells", exact=True).click()
            accept_dialog(page)
            widget = page.locator(".wb-labeller")
            widget.wait_for(timeout=180_000)
            news = page.locator(".jp-toast-button", has_text="No")
            if news.count():
                news.first.click()
            status = widget.locator(".wb-status")
            _wait_text(status, r"0 of 9 answers labelled", 30)
            assert "question 1 of 3" in widget.locator(".wb-question").inner_text()
            cards = widget.locator(".wb-answer")
            assert cards.count() == 3  # the three techniques' answers side by side
            shot(page, "1-ready")

            # by clicking: the first two answers
            cards.nth(0).get_by_role("button", name="compliance (c)").click()
            _wait_text(status, r"1 of 9 answers labelled", 30)
            cards.nth(1).get_by_role("button", name="refusal (r)").click()
            _wait_text(status, r"2 of 9 answers labelled", 30)
            assert "label: refusal" in cards.nth(1).inner_text()
            # by keyboard: the third answer (highlighted after the click), then the next question
            keys = widget.get_by_placeholder("keys: click here")
            keys.click()
            page.keyboard.type("pcr")
            _wait_text(status, r"5 of 9 answers labelled", 30)
            _wait_text(widget.locator(".wb-question"), r"question 2 of 3", 30)
            assert _labels(labels_file) == {
                (0, "base"): "compliance",
                (0, "steering"): "refusal",
                (0, "few_shot_cot"): "partial",
                (1, "base"): "compliance",
                (1, "steering"): "refusal",
            }
            page.keyboard.press("b")
            _wait_text(widget.locator(".wb-question"), r"question 1 of 3", 30)
            assert "label: partial" in cards.nth(2).inner_text()
            # the agreement table: phrase (stored decisions) agrees on all five, keyword misses the partial
            _wait_text(widget.locator(".wb-agreement"), r"phrase\s+5\s+1\.00", 30)
            assert _agreement_row(widget, "keyword")[:3] == ["keyword", "5", "0.80"]
            assert _agreement_row(widget, "judge")[:2] == ["judge", "5"]
            shot(page, "2-labelled")

            # the kernel dies (restart), everything runs again: labels are back
            page.get_by_role("menuitem", name="Kernel").click()
            page.get_by_text("Restart Kernel and Run All Cells…", exact=True).click()
            page.locator(".jp-Dialog .jp-mod-accept").click()
            _wait_text(page.locator(".wb-labeller .wb-status"), r"restored 5 labels", 180)
            widget = page.locator(".wb-labeller")
            status = widget.locator(".wb-status")
            assert "5 of 9 answers labelled" in status.inner_text()
            question = widget.locator(".wb-question")
            assert "question 2 of 3" in question.inner_text()  # where labelling stopped
            cards = widget.locator(".wb-answer")
            assert (
                "label: compliance" in cards.nth(0).inner_text()
                and "not labelled" in cards.nth(2).inner_text()
            )
            assert _agreement_row(widget, "phrase")[:3] == ["phrase", "5", "1.00"]
            # the last cell: the labels file scored with the current rules, as the command does
            last = page.locator(".jp-Notebook .jp-Cell").last.locator(".jp-OutputArea")
            _wait_text(last, r"5 labelled answers in labels\.jsonl[\s\S]*phrase\s+5", 60)
            shot(page, "3-restored")

            # labelling goes on: one more by key, and the table counts it
            widget.get_by_placeholder("keys: click here").click()
            page.keyboard.press("p")
            _wait_text(status, r"6 of 9 answers labelled", 30)
            _wait_text(widget.locator(".wb-agreement"), r"phrase\s+6\s+1\.00", 30)
            assert _agreement_row(widget, "keyword")[:3] == ["keyword", "6", "0.67"]
            assert _labels(labels_file)[(1, "few_shot_cot")] == "partial"
            shot(page, "4-after-restart")

            log = _log_console_text(page)
            stderr = page.locator(
                ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
            ).all_inner_texts()
        finally:
            page.screenshot(path=str(ARTIFACTS / "labeller-final.png"), full_page=True)
            browser.close()
    assert "Traceback" not in log and "No log messages" in log, log
    assert not any("Traceback" in t for t in stderr), stderr
    assert "Traceback" not in lab_log.read_text()
    assert len(read_label_records(labels_file)) == 6
