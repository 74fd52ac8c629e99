"""Real JupyterLab in headless Chromium: the refusal suite notebook (06) as a person reads it.

Runs notebook 06 at its defaults (every prompt of the sanity set, five samples each, the
model and its river abstainer) in a 1,400 x 1,000 window and checks what a reader meets: every
split of the dataset is in the run, the misbehaviour and source tables fit the notebook column
(no horizontal scrolling, nothing cut off), the figures are shown and each says where it was
saved. Screenshots go to ``runs/browser_test/refusal-*`` (docs/notebooks-in-use.md shows them);
that a small ``limit`` keeps every split is tests/test_refusal_views.py's.
"""

import json

import pytest

from lab_server import jupyter_lab, notebook_page
from test_browser import ARTIFACTS, CHROMIUM, ROOT, _log_console_text, _wait_text, needs_chromium

pytestmark = [pytest.mark.browser, pytest.mark.integration]
NOTEBOOK = "06_refusal_suite.ipynb"


@pytest.fixture
def lab_06(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / NOTEBOOK).write_bytes((ROOT / "notebooks" / NOTEBOOK).read_bytes())
    with jupyter_lab(
        tmp_path / "root", tmp_path, env={"WORKBENCH_RUNS": str(tmp_path / "runs")}
    ) as served:
        yield served


def _fits(page, locator) -> dict:
    """The element's width against the notebook output area holding it (scroll widths)."""
    return locator.evaluate(
        "e => ({width: e.scrollWidth, area: e.closest('.jp-OutputArea-output').clientWidth})"
    )


@needs_chromium
def test_the_refusal_suite_reads_whole_at_1400_px(lab_06):
    url, token, lab_log = lab_06
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with notebook_page(url, token, NOTEBOOK, CHROMIUM, ARTIFACTS / "refusal-final.png") as page:
        last = page.locator(".jp-Notebook .jp-Cell").last.locator(".jp-OutputArea")
        _wait_text(last, r"unknownbench|keyword", 1500)

        tables = page.locator(".jp-OutputArea-output table")
        misbehaviour = next(
            t for t in tables.all() if "verdict" in t.locator("th").all_inner_texts()
        )
        text = misbehaviour.inner_text()
        for split in ("should_refuse", "may_refuse", "should_not_refuse"):
            assert split in text, text
        for column in ("rejection %", "should be", "verdict"):
            assert column in text
        size = _fits(page, misbehaviour)
        (ARTIFACTS / "refusal-layout.json").write_text(json.dumps({"misbehaviour": size}))
        assert size["width"] <= size["area"], size  # nothing cut off, no scrolling
        misbehaviour.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "refusal-1-misbehaviour.png"))
        rates = tables.last
        size = _fits(page, rates)
        assert size["width"] <= size["area"], size

        images = page.locator(".jp-OutputArea-output img")
        assert images.count() >= 3  # two systems' histograms and the source rates
        outputs = " ".join(page.locator(".jp-OutputArea-output").all_inner_texts())
        assert outputs.count("saved:") >= 3, outputs[-3000:]
        images.first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "refusal-2-figures.png"))
        log = _log_console_text(page)
    assert "Traceback" not in log, log
    assert "Traceback" not in lab_log.read_text()
