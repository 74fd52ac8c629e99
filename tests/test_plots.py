"""Every figure function produces a PDF and a PNG with labelled axes."""

import numpy as np
import pandas as pd
import pytest

from workbench.plots import save_figure
from workbench.plots.select import (
    plot_atomic_vs_compositions,
    plot_by_level,
    plot_compliance,
    plot_confidence_histograms,
    plot_generalization_errors,
    plot_technique_metrics,
    plot_universality,
)

TECHS = ["base", "steering", "sft"]


def _table():
    rows = []
    for kind in ("atomic", "composition"):
        for i, t in enumerate(TECHS):
            rec = {"model": "m", "technique": t, "target_kind": kind}
            for j, m in enumerate(("abstention", "generalization", "specificity", "overall")):
                rec[m] = 0.2 + 0.2 * i + 0.05 * j
                rec[f"{m}_lo"], rec[f"{m}_hi"] = rec[m] - 0.1, rec[m] + 0.1
            rows.append(rec)
    return pd.DataFrame(rows)


CASES = {
    "techniques": lambda: plot_technique_metrics(
        _table()[lambda d: d.target_kind == "atomic"], "t"
    ),
    "levels": lambda: plot_by_level(
        pd.DataFrame(
            [
                {
                    "technique": t,
                    "target_level": lvl,
                    "abstention": 0.5,
                    "generalization": 0.4,
                    "specificity": 0.3,
                }
                for t in TECHS
                for lvl in (1, 2, 3)
            ]
        )
    ),
    "universality": lambda: plot_universality(pd.DataFrame(np.eye(3), index=TECHS, columns=TECHS)),
    "generalization_errors": lambda: plot_generalization_errors(
        pd.DataFrame([{"technique": t, "explained_share": 0.5, "misses": 4} for t in TECHS])
    ),
    "atomic_vs_compositions": lambda: plot_atomic_vs_compositions(_table()),
    "confidence": lambda: plot_confidence_histograms(
        pd.DataFrame([{"technique": t, "confidence": c} for t in TECHS for c in (-1, 0, 0.5, 1)])
    ),
    "compliance": lambda: plot_compliance(
        pd.DataFrame(
            [
                {"technique": t, "compliance": 50, "ambiguous": 10, "rejection": 40, "unscored": 0}
                for t in TECHS
            ]
        )
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_figure_is_saved_as_pdf_and_png(tmp_path, name):
    fig = CASES[name]()
    # panels stacked on one x scale: the lowest carries the x axis's label and ticks
    assert any(
        ax.get_xlabel() or [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        for ax in fig.axes
    )
    paths = save_figure(fig, name, tmp_path)
    assert [p.suffix for p in paths] == [".pdf", ".png"]
    assert all(p.stat().st_size > 1000 for p in paths)


def test_a_zero_bar_is_labelled_and_the_caption_names_n_and_the_interval():
    table = _table()[lambda d: d.target_kind == "atomic"].copy()
    table.loc[table["technique"] == "base", "abstention"] = 0.0
    table["targets"] = 3
    fig = plot_technique_metrics(table, "atomic concepts", n_boot=1000)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert "0.00" in labels
    assert "mean over 3 target concepts" in ax.get_title() and "95% bootstrap" in ax.get_title()
    assert "1000 resamples" in ax.get_title()


def test_degenerate_data_gives_a_note_not_a_figure(tmp_path, capsys):
    from workbench.plots.save import NoFigure

    one_level = pd.DataFrame(
        [
            {
                "technique": t,
                "target_level": 2,
                "abstention": 0.5,
                "generalization": 0.4,
                "specificity": 0.3,
            }
            for t in TECHS
        ]
    )
    assert isinstance(plot_by_level(one_level), NoFigure)
    assert isinstance(
        plot_universality(pd.DataFrame(np.eye(3), index=TECHS, columns=TECHS), n_concepts=2),
        NoFigure,
    )
    assert isinstance(
        plot_universality(pd.DataFrame([[1.0]], index=["sft"], columns=["sft"])), NoFigure
    )
    failed_probe = pd.DataFrame(
        [{"technique": t, "explained_share": float("nan"), "misses": 4} for t in TECHS]
    )
    note = plot_generalization_errors(failed_probe)
    assert isinstance(note, NoFigure) and "uninformative" in note.reason
    assert save_figure(note, "x", tmp_path) == [] and not list(tmp_path.iterdir())
    assert "no figure 'x'" in capsys.readouterr().out
    assert "No figure" in note._repr_markdown_()


def test_levels_are_markers_not_lines_through_categories():
    levels = pd.DataFrame(
        [
            {
                "technique": t,
                "target_level": lvl,
                "abstention": 0.5,
                "generalization": 0.4,
                "specificity": 0.3,
                "abstention_min": 0.2,
                "abstention_max": 0.9,
                "n_targets": 2,
            }
            for t in TECHS
            for lvl in (1, 2)
        ]
    )
    fig = plot_by_level(levels)
    for line in fig.axes[0].get_lines():
        assert line.get_linestyle() in ("None", "", " ") or len(line.get_xdata()) <= 2
    # the panels share the x axis: the lowest one's tick labels name the levels
    assert any("n=2" in t.get_text() for t in fig.axes[-1].get_xticklabels())


def test_figures_do_not_touch_pyplot_state():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    for make in CASES.values():
        make()
    assert plt.get_fignums() == before


def test_a_run_figure_is_saved_and_says_where(tmp_path, monkeypatch):
    from workbench.plots.save import NoFigure, SavedFigure, new_figure, save_run_figure, show_inline

    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path))
    fig = new_figure(2, 2)
    fig.subplots().plot([0, 1], [1, 0])
    saved = save_run_figure(fig, "r", "line")
    assert isinstance(saved, SavedFigure) and [p.suffix for p in saved] == [".pdf", ".png"]
    assert all(p.is_file() for p in saved) and "line.png" in saved._repr_markdown_()
    assert show_inline(fig) is False  # no kernel here: nothing is displayed
    assert save_run_figure(NoFigure("nothing to draw"), "r", "empty") == []
    assert saved[0].parent == tmp_path / "r" / "figures"


def test_figures_of_a_speed_first_run_say_so_in_their_caption(tmp_path, monkeypatch):
    from workbench.models.numerics import record_run_numerics
    from workbench.plots.save import new_figure, save_run_figure

    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path))
    for run, dtypes, numerics in (
        ("exact", ["float32"], ["reproducible"]),
        ("quick", ["bfloat16", "float32"], ["fast", "reproducible"]),
    ):
        (tmp_path / run).mkdir()
        record_run_numerics(tmp_path / run, dtypes, numerics)
        fig = new_figure(2, 2)
        fig.subplots().set_title("rates")
        save_run_figure(fig, run, "line")
        caption = fig._suptitle.get_text() if fig._suptitle is not None else ""
        if run == "exact":
            assert caption == ""
        else:
            # wrapped to the figure's width
            assert " ".join(caption.split()) == (
                "numerics: fast (bfloat16): answers depend on batch and CPU"
            )


def test_the_same_figure_saves_to_the_same_bytes(tmp_path):
    import time

    from workbench.plots.save import new_figure, save_figure

    def draw(directory):
        fig = new_figure(2, 2)
        fig.subplots().plot([0, 1], [1, 0])
        return [p.read_bytes() for p in save_figure(fig, "f", directory)]

    first = draw(tmp_path / "a")
    time.sleep(1.1)  # a PDF creation date would differ now
    assert draw(tmp_path / "b") == first


def test_saved_paths_read_relative_to_the_checkout(tmp_path):
    """A run inside the checkout says ``runs/<run>/figures/x.pdf`` (the same on every machine
    and in the docs' executed notebooks), one outside it says where."""
    from workbench.paths import repo_root
    from workbench.plots.save import SavedFigure

    inside = SavedFigure([repo_root() / "runs" / "demo" / "figures" / "x.pdf"])
    assert inside._repr_markdown_() == "saved: `runs/demo/figures/x.pdf`"
    assert repr(inside) == "saved: runs/demo/figures/x.pdf"
    outside = SavedFigure([tmp_path / "x.png"])
    assert repr(outside) == f"saved: {tmp_path / 'x.png'}"


def test_a_long_id_in_a_title_breaks_at_its_separators():
    """A panel title such as ``steering@wn:09411430-n`` once broke as ``wn:0`` / ``9411430-n``."""
    from workbench.plots.save import fit_lines

    assert fit_lines(["steering@wn:09411430-n"], 0.9) == "steering@wn:\n09411430-n"
    lines = fit_lines(["smollm2-135m-instruct / steering@wn:09411430-n"], 0.9).split("\n")
    assert lines == ["smollm2-135m-", "instruct /", "steering@wn:", "09411430-n"]
