"""Real JupyterLab in headless Chromium: the steering inspector as a person uses it.

Starts ``jupyter lab`` on 127.0.0.1 (free port, token), opens the notebook, runs all cells
through the menu, and then clicks and types as a researcher does: it renders; it changes the
concept, moves the threshold and changes the vote rule and strength while an answer is being
generated, and checks that the answer arrives, that every view shows the current settings and
that no traceback reaches the log console. Screenshots of each step are saved under
``runs/browser_test/``. Needs Debian's chromium (``scripts/system_deps.sh`` installs it) and the
``playwright`` package (no browser download).
"""

import re
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from lab_server import jupyter_lab, notebook_page

pytestmark = [pytest.mark.browser, pytest.mark.integration]

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def lab(tmp_path):
    # serve a copy, so that JupyterLab's autosave never writes outputs into the repository
    (tmp_path / "root").mkdir()
    shutil.copy(ROOT / "notebooks" / "10_steering_inspector.ipynb", tmp_path / "root")
    with jupyter_lab(tmp_path / "root", tmp_path) as served:
        yield served


ARTIFACTS = ROOT / "runs" / "browser_test"
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (scripts/system_deps.sh)"
)


@contextmanager
def inspector_page(lab, name: str):
    """A page with notebook 10 open and all its cells run, its widget shown; a screenshot is
    kept on exit."""
    url, token, _ = lab
    final = ARTIFACTS / f"{name}-final.png"
    with notebook_page(url, token, "10_steering_inspector.ipynb", CHROMIUM, final) as page:
        page.wait_for_selector(".jp-OutputArea-output .widget-vbox", timeout=180_000)
        yield page


def _wait_text(locator, pattern: str, timeout_s: float) -> str:
    """Poll ``locator``'s text until it matches ``pattern``; the text, or a failure saying what was shown."""
    deadline, text = time.time() + timeout_s, ""
    while time.time() < deadline:
        text = locator.inner_text()
        if re.search(pattern, text):
            return text
        time.sleep(0.5)
    raise AssertionError(
        f"{pattern!r} did not appear within {timeout_s:.0f} s; shown:\n{text[-3000:]}"
    )


def _slider(out, label: str):
    return out.locator(
        ".widget-hslider", has=out.page.locator("label", has_text=re.compile(f"^{label}$"))
    )


def _set_slider(out, label: str, value: float) -> None:
    """Type a value into a slider's readout, as a person does for a precise threshold."""
    readout = _slider(out, label).locator(".widget-readout")
    readout.click()
    out.page.keyboard.press("Control+A")
    out.page.keyboard.type(f"{value}")
    out.page.keyboard.press("Enter")


def _log_console_text(page) -> str:
    """Open JupyterLab's log console for the notebook and return what it holds."""
    page.evaluate(
        "window.jupyterapp.commands.execute('logconsole:open', {insertMode: 'split-bottom'})"
    )
    page.wait_for_selector(".jp-LogConsole", timeout=20_000)
    page.wait_for_timeout(1000)
    return page.locator(".jp-LogConsole").inner_text()


@needs_chromium
def test_steering_inspector_renders_and_survives_real_interaction(lab):
    """It renders (title, concept list, sliders, the figure as an image), then survives a
    person changing every control while an answer is generated. (One JupyterLab, one kernel,
    one model load for both: they were two tests with a server each.)"""
    shot = lambda page, step: page.screenshot(
        path=str(ARTIFACTS / f"interact-{step}.png"), full_page=True
    )
    with inspector_page(lab, "interact") as page:
        page.wait_for_selector(".jp-OutputArea-output img.widget-image", timeout=120_000)
        out = page.locator(".jp-OutputArea-output").last
        assert "Steering inspector" in out.inner_text()
        assert page.locator(".jp-OutputArea-output .widget-select-multiple").count() >= 1
        assert page.locator(".jp-OutputArea-output .widget-slider").count() >= 3
        src = page.locator(".jp-OutputArea-output img.widget-image").first.get_attribute("src")
        assert src and src.startswith(("blob:", "data:image/png"))
        _wait_text(out, r"ready: .*river", 600)
        shot(page, "1-river-ready")

        # change concept: search, click a result (typing alone selects nothing), prepare
        out.get_by_placeholder("search concepts").fill("scientist")
        results = out.locator(".widget-select select").first
        _wait_text(results, r"scientist\s\(level", 30)  # ipywidgets shows spaces as nbsp
        label = next(
            t
            for t in results.locator("option").all_inner_texts()
            if t.replace("\xa0", " ").strip().startswith("scientist (")
        )
        results.select_option(label=label)
        _wait_text(out, r"ancestors A\(c\)", 30)
        out.get_by_role("button", name="prepare steering").click()
        _wait_text(out, r"ready: .*scientist", 600)
        shot(page, "2-scientist-ready")

        # ask, and change every control while the answer is being generated
        question = out.get_by_placeholder("type a question")
        question.fill("Who was Marie Curie?")
        question.press("Enter")
        _wait_text(out, r"condition by vote", 120)
        out.get_by_role("button", name="answer").click()
        _wait_text(out, r"(deciding|generating|answering)", 60)
        _set_slider(out, "threshold", 0.3)
        out.locator(".widget-dropdown select").select_option("majority")
        _set_slider(out, "strength", 1.2)
        shot(page, "3-changed-while-answering")

        text = _wait_text(out, r"unsteered[\s\S]*made with", 600)
        text = _wait_text(out, r"condition by vote majority", 120)
        # the votes table is for the current settings: the threshold typed at the viewed layer
        layer = _slider(out, "view layer").locator(".widget-readout").inner_text().strip()
        shown = float(_slider(out, "threshold").locator(".widget-readout").inner_text())
        assert re.search(rf"\n{layer}\s+[-+]\d\.\d+\s+{re.escape(f'{shown:+.3f}')}", text), text
        # the answer says what made it; made under other settings, it says so
        made = re.search(r"made with (.*)", text).group(1)
        current = "vote majority" in made and "strength 1.20" in made and f"{shown:+.3f}" in made
        assert current or "settings changed since this answer" in text, text
        assert "scientist" in made
        assert out.get_by_role("button", name="answer").is_enabled()
        shot(page, "4-answer-arrived")

        log = _log_console_text(page)
        shot(page, "5-log-console")
        stderr = page.locator(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
        ).all_inner_texts()
    assert "Traceback" not in log and "No log messages" in log, log
    assert not any("Traceback" in t for t in stderr), stderr
    assert "Traceback" not in lab[2].read_text()
