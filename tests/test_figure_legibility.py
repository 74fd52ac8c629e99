"""Every figure of notebooks 01-06 (and 00's and 11's) is legible at the width it is made for (a paper's column,
3.25 in, unless its docstring says page): saved there, all its text is at least 8 pt, on the
page and clear of other text; an axis that counts has integer ticks; panels that are compared
share one scale; every colour and band is named in a legend (or by the tick its bar sits on).

The checks are general: a new figure is checked by one more line in ``CASES``. The data are
synthetic, in the shapes the notebooks pass (made by the same functions where they are cheap).
"""

from __future__ import annotations

import re
from itertools import combinations
from unittest.mock import patch

import numpy as np
import pandas as pd
import pytest

from workbench.plots.save import NoFigure, save_figure

MIN_POINTS = 8.0
#: An axis label with one of these words counts things (its ticks must be integers) unless it
#: is a share of them (NOT_COUNTS).
COUNT_WORDS = re.compile(r"\b(prompts|questions|count|concepts|tokens|answers|targets)\b")
NOT_COUNTS = re.compile(r"%|\b(rate|share|mean|fraction)\b")
TECHS = ["base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo"]


# -- the checks ---------------------------------------------------------------------------------
def drawn_texts(fig):
    """Draw ``fig`` (as a PNG would be) and return its renderer and every text actually drawn:
    (line, size in points, its Text artist), from the renderer's own calls."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
    from matplotlib.text import Text

    drawn = []
    drawing: list = []  # the Text being drawn (the renderer is not told for a multi-line one)
    draw_text, draw = RendererAgg.draw_text, Text.draw

    def spy_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        drawn.append((s, prop.get_size_in_points(), mtext or (drawing[-1] if drawing else None)))
        return draw_text(self, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    def spy_draw(self, renderer):
        drawing.append(self)
        try:
            return draw(self, renderer)
        finally:
            drawing.pop()

    canvas = FigureCanvasAgg(fig)
    with patch.object(RendererAgg, "draw_text", spy_text), patch.object(Text, "draw", spy_draw):
        canvas.draw()
    return canvas.get_renderer(), drawn


def small_texts(drawn) -> list[tuple[str, float]]:
    return [(s, size) for s, size, _ in drawn if s.strip() and size < MIN_POINTS - 1e-6]


def text_problems(fig, renderer, drawn, slack_pt: float = 1.0) -> list[str]:
    """Texts off the page, and pairs of texts over each other (by more than ``slack_pt`` in
    both directions)."""
    px = fig.dpi / 72
    artists = list(dict.fromkeys(t for s, _, t in drawn if t is not None and s.strip()))
    boxes = [(t, t.get_window_extent(renderer)) for t in artists]
    page = fig.bbox
    problems = []
    for t, b in boxes:
        if (
            b.x0 < page.x0 - slack_pt * px
            or b.y0 < page.y0 - slack_pt * px
            or b.x1 > page.x1 + slack_pt * px
            or b.y1 > page.y1 + slack_pt * px
        ):
            problems.append(f"off the page: {t.get_text()!r}")
    for (t1, b1), (t2, b2) in combinations(boxes, 2):
        w = min(b1.x1, b2.x1) - max(b1.x0, b2.x0)
        h = min(b1.y1, b2.y1) - max(b1.y0, b2.y0)
        if w > slack_pt * px and h > slack_pt * px:
            problems.append(f"overlap: {t1.get_text()!r} and {t2.get_text()!r}")
    return problems


def data_axes(fig):
    return [
        ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>" and ax.axison
    ]


def non_integer_count_ticks(fig) -> list[str]:
    """Ticks that are not integers on axes whose label (or a shared sibling's) counts things."""
    problems = []
    for ax in data_axes(fig):
        for axis, shared in (
            (ax.xaxis, ax.get_shared_x_axes()),
            (ax.yaxis, ax.get_shared_y_axes()),
        ):
            name = "x" if axis is ax.xaxis else "y"
            labels = [
                (a.xaxis if name == "x" else a.yaxis).get_label_text()
                for a in shared.get_siblings(ax)
            ]
            label = next((lbl for lbl in labels if lbl), "")
            if not COUNT_WORDS.search(label) or NOT_COUNTS.search(label):
                continue
            lo, hi = sorted(axis.get_view_interval())
            ticks = [t for t in axis.get_majorticklocs() if lo - 1e-9 <= t <= hi + 1e-9]
            bad = [float(t) for t in ticks if abs(t - round(t)) > 1e-9]
            if bad:
                problems.append(f"{label!r} ({name}) has ticks {bad}")
    return problems


def limits(fig, axis: str) -> set:
    return {
        tuple(np.round(ax.get_xlim() if axis == "x" else ax.get_ylim(), 9)) for ax in data_axes(fig)
    }


def _key(colour) -> tuple | None:
    from matplotlib.colors import to_rgba

    r, g, b, a = to_rgba(colour)
    return None if a == 0 else (round(r, 2), round(g, 2), round(b, 2))


def _legend_colours(fig) -> set:
    from matplotlib.collections import Collection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    out: set = set()
    for legend in legends:
        for h in legend.legend_handles:
            if isinstance(h, Patch):
                out |= {_key(h.get_facecolor()), _key(h.get_edgecolor())}
            elif isinstance(h, Line2D):
                out |= {_key(h.get_color()), _key(h.get_markerfacecolor())}
            elif isinstance(h, Collection):
                out |= {_key(c) for c in [*h.get_facecolors(), *h.get_edgecolors()]}
    return out - {None}


def _name(label) -> str:
    """A tick label that names a category ("" for a number on a numeric axis)."""
    text = label.get_text().replace("\u2212", "-")
    try:
        float(text)
    except ValueError:
        return text
    return ""


def unnamed_colours(fig) -> list[str]:
    """Colours of bars, bands and lines of data that no legend names (nor the labelled tick a
    bar sits on); none when the figure uses one colour only."""
    from matplotlib.container import BarContainer, ErrorbarContainer

    used: dict = {}  # colour -> what uses it
    by_tick: dict = {}  # colour -> whether every bar of it sits on a labelled tick
    for ax in data_axes(fig):
        caps = set()
        for c in ax.containers:
            bars_err = c.errorbar if isinstance(c, BarContainer) else c
            if isinstance(bars_err, ErrorbarContainer):
                caps |= set(bars_err.lines[1])
        xt = {round(t, 6): _name(lbl) for t, lbl in zip(ax.get_xticks(), ax.get_xticklabels())}
        yt = {round(t, 6): _name(lbl) for t, lbl in zip(ax.get_yticks(), ax.get_yticklabels())}
        for p in ax.patches:
            if not p.get_visible():
                continue
            key = _key(p.get_facecolor())
            if key is None:
                continue
            used.setdefault(key, f"patch in {ax.get_title()!r}")
            box = p.get_bbox()
            on_tick = bool(
                xt.get(round((box.x0 + box.x1) / 2, 6)) or yt.get(round((box.y0 + box.y1) / 2, 6))
            )
            by_tick[key] = by_tick.get(key, True) and on_tick
        for line in ax.lines:
            if line in caps or not line.get_visible() or len(line.get_xdata()) == 0:
                continue
            key = _key(line.get_color())
            if key is not None:
                used.setdefault(key, f"line in {ax.get_title()!r}")
                by_tick[key] = False
    if len(used) <= 1:
        return []
    named = _legend_colours(fig)
    return [f"{k} ({what})" for k, what in used.items() if k not in named and not by_tick.get(k)]


def colour_maps_without_bar(fig) -> list[str]:
    from matplotlib.collections import QuadMesh
    from matplotlib.image import AxesImage

    return [
        str(a)
        for ax in data_axes(fig)
        for a in [*ax.collections, *ax.images]
        if isinstance(a, QuadMesh | AxesImage) and a.colorbar is None
    ]


def legibility_problems(fig, tmp_path, name: str, width: str = "column") -> list[str]:
    """Everything wrong with ``fig`` saved at ``width`` (empty when it is legible)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paths = save_figure(fig, name, tmp_path, width=width)
        renderer, drawn = drawn_texts(fig)
    assert [p.suffix for p in paths] == [".pdf", ".png"]
    assert drawn, "no text drawn"
    return (
        [f"warning: {w.message}" for w in caught if "layout" in str(w.message).lower()]
        + [f"{s!r} is {size:g} pt" for s, size in small_texts(drawn)]
        + text_problems(fig, renderer, drawn)
        + non_integer_count_ticks(fig)
        + [f"colour {c} is in no legend" for c in unnamed_colours(fig)]
        + [f"colour map without a colour bar: {c}" for c in colour_maps_without_bar(fig)]
    )


# -- the data, in the notebooks' shapes ---------------------------------------------------------
def select_rows(models=("org/tiny_model",), seed: int = 0) -> pd.DataFrame:
    """Rows as the SELECT runner writes them: six techniques, atomic targets at three levels and
    compositions at two, every relation."""
    rng = np.random.default_rng(seed)
    targets = [(f"yago:T{i}", "atomic", 1 + i % 3) for i in range(6)]
    targets += [(f"comp:C{i}", "composition", 1 + i % 2) for i in range(4)]
    rows = []
    for model in models:
        for ti, technique in enumerate(TECHS):
            p = 0.1 + 0.15 * ti
            for target, kind, level in targets:
                for relation, q in (
                    ("target", p),
                    ("descendant", 0.8 * p),
                    ("sibling", 0.3 * p),
                    ("parent", 0.2 * p),
                    ("unrelated", 0.05),
                ):
                    for k in range(4):
                        rows.append(
                            {
                                "model": model,
                                "technique": technique,
                                "target": target,
                                "target_kind": kind,
                                "target_name": target.split(":")[1],
                                "target_level": level,
                                "relation": relation,
                                "seed": 0,
                                "question_concept": f"{target}/q{k}",
                                "refused_phrase": bool(rng.random() < q),
                            }
                        )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def select():
    from workbench.scoring.metrics import (
        by_level,
        generalization_errors,
        technique_table,
        universality,
    )
    from workbench.tables.select_compare import side_by_side, technique_summary

    rows = select_rows()
    atoms = rows[rows["target_kind"] == "atomic"]
    released = select_rows(("Gemma-2-IT-2B", "LLaMa-3.1-Instruct-8B", "GPT-4o-U"), seed=1)
    desc = atoms[atoms["relation"] == "descendant"]
    probes = desc[["model", "target", "question_concept"]].drop_duplicates()
    probes = probes.assign(known=[bool(i % 3) for i in range(len(probes))])
    return {
        "rows": rows,
        "table": technique_summary(atoms, "refused_phrase", n_boot=20),
        "select_table": technique_summary(atoms, "refused_phrase", "select"),
        "levels": by_level(atoms),
        "corr": universality(atoms),
        "errors": generalization_errors(atoms, probes),
        "beside": side_by_side(atoms[atoms["technique"] != "base"], released, "refused_phrase"),
        "kinds": technique_table(rows, n_boot=20, by=("model", "target_kind", "technique")),
    }


def judge_scores(n: int = 40, seed: int = 0) -> pd.DataFrame:
    """notebook 03's ``prompt_confidence`` rows: c(x) per prompt and technique."""
    from workbench.scoring.judge import classify_confidence

    rng = np.random.default_rng(seed)
    rows = []
    for ti, t in enumerate(TECHS):
        for i in range(n):
            c = float(np.clip(rng.normal(-0.6 + 0.25 * ti, 0.4), -1, 1))
            rows.append(
                {
                    "model": "m",
                    "technique": t,
                    "target": "yago:River",
                    "seed": 0,
                    "question_index": i,
                    "relation": "target",
                    "samples": 5,
                    "confidence": c,
                    "class": classify_confidence(c, 0.1),
                }
            )
    return pd.DataFrame(rows)


def unknown_rows(n: int = 120, seed: int = 0) -> pd.DataFrame:
    """notebook 04's rows: a 0-10 confidence, a refusal, correctness, entropy and perplexity
    of answerable and unanswerable questions."""
    rng = np.random.default_rng(seed)
    conf = rng.integers(0, 11, n)
    return pd.DataFrame(
        {
            "partition": np.where(np.arange(n) % 2, "answerable", "unanswerable"),
            "confidence_logprob": conf + rng.uniform(-0.4, 0.4, n),
            "refused_phrase": rng.random(n) < 1 - conf / 10,
            "correct": rng.random(n) < conf / 10,
            "entropy": rng.gamma(2.0, 0.8, n),
            "perplexity": np.exp(rng.normal(2.5, 0.8, n)),
        }
    )


def edit_metrics_frame() -> pd.DataFrame:
    """notebook 05's ``edit_metrics``: editor, metric, subset, value, n, chance."""
    rows = []
    for e, editor in enumerate(("ft-l", "rome", "memit")):
        for metric in ("edit_success", "property_success", "consistency", "invariance"):
            for subset in (
                "overall",
                "token_type=typical",
                "token_type=rare",
                "group=animal",
                "group=vehicle",
                "group=musical_instrument",
                "group=fruit",
            ):
                rows.append(
                    {
                        "editor": editor,
                        "metric": metric,
                        "subset": subset,
                        "value": 0.3 + 0.2 * e + 0.01 * len(subset),
                        "n": 24,
                        "chance": 0.25,
                    }
                )
    return pd.DataFrame(rows)


def suite_scores(limit_drops: bool = False, sizes: tuple[int, int, int] = (8, 3, 12)):
    """The refusal suite's prompt scores and split table (from its own functions): a system on
    a dataset of three splits of ``sizes`` prompts; with ``limit_drops`` no may-refuse prompt
    has a scored sample (as a small ``limit`` leaves it)."""
    from workbench.refusal.scores import prompt_scores, split_table

    rng = np.random.default_rng(0)
    rows = []
    for system in ("tiny", "tiny_steering_river"):
        for (expected, p), n in zip(
            (("should_refuse", 0.8), ("may_refuse", 0.5), ("should_not_refuse", 0.1)), sizes
        ):
            for i in range(n):
                for sample in range(3):
                    empty = limit_drops and expected == "may_refuse"
                    rows.append(
                        {
                            "system": system,
                            "model": "tiny",
                            "technique": None if system == "tiny" else "steering",
                            "target": None,
                            "dataset": "sanity",
                            "split": f"sanity/{expected}",
                            "expected": expected,
                            "category": "c",
                            "prompt_id": f"{expected}-{i}",
                            "prompt": "q",
                            "sample": sample,
                            "response": "r",
                            "weight": None if empty else float(rng.normal(-5, 1)),
                            "refused_judge": bool(rng.random() < p),
                            "refused_phrase": bool(rng.random() < p),
                            "refused_keyword": bool(rng.random() < p * 0.8),
                            "refused_unknownbench": bool(rng.random() < p * 0.5),
                        }
                    )
    rows = pd.DataFrame(rows)
    scores = prompt_scores(rows, "judge", 0.1)
    return scores, split_table(rows, scores)


def small_bench():
    """A benchmark's two taxonomies (notebook 00's ``bench``): the hand-built atomic one and a
    composition per river."""
    from types import SimpleNamespace

    from taxonomy_fixtures import hand_taxonomy
    from workbench.taxonomy.model import Concept, Taxonomy

    comps = [
        Concept("c:root", "compositions", parent=None, root="c:root"),
        Concept("c:river_in_europe", "river in Europe", parent="c:root", root="c:root"),
        Concept("c:danube_like", "Danube-like river", parent="c:river_in_europe", root="c:root"),
    ]
    return SimpleNamespace(
        atomic=hand_taxonomy(), compositions=Taxonomy.from_concepts(comps, name="c")
    )


def answers() -> pd.DataFrame:
    """notebook 00's ``generations_frame``: prompt, n_tokens, finish_reason."""
    prompts = [
        "What is the longest river in Europe, and which countries does it flow through?",
        "Name a volcano.",
        "Who was Albert Einstein?",
        "Describe a lake in two sentences, mentioning what lives in it and around it.",
    ]
    return pd.DataFrame(
        {
            "prompt": prompts,
            "n_tokens": [48, 7, 31, 48],
            "finish_reason": ["length", "stop", "stop", "length"],
        }
    )


def gate_curve():
    """notebook 11's gate curve (per setting and threshold offset) and per-target rows."""
    rows = []
    for s, setting in enumerate(("layer 12", "layer 18, mean of 4")):
        for offset in np.linspace(-1, 1, 9):
            rate = 1 / (1 + np.exp(3 * offset - s))
            rows.append(
                {
                    "setting": setting,
                    "offset": offset,
                    "tpr_target": rate,
                    "tpr_descendant": rate * 0.9,
                    "fpr_near": rate * 0.6,
                    "fpr_far": rate * 0.2,
                }
            )
    per_target = pd.DataFrame(
        [{"setting": s, "target": t} for s in ("layer 12", "layer 18, mean of 4") for t in "abc"]
    )
    return pd.DataFrame(rows), per_target


# -- every figure -------------------------------------------------------------------------------
def _cases():
    from workbench.plots import editing, generation, steering, taxonomy, unknown
    from workbench.plots import select as sel
    from workbench.refusal import plots as refusal
    from workbench.scoring.agreement import compliance_shares
    from workbench.unknown.measures import by_confidence

    def scores_03():
        return judge_scores()

    return {
        # notebooks 01 and 02
        "technique_metrics": lambda d: sel.plot_technique_metrics(
            d["table"], "atomic concepts", 20
        ),
        "technique_metrics_select": lambda d: sel.plot_technique_metrics(d["select_table"]),
        "by_level": lambda d: sel.plot_by_level(d["levels"]),
        "universality": lambda d: sel.plot_universality(d["corr"], n_concepts=6),
        "generalization_errors": lambda d: sel.plot_generalization_errors(d["errors"]),
        "against_release": lambda d: sel.plot_against_release(d["beside"], "same"),
        "atomic_vs_compositions": lambda d: sel.plot_atomic_vs_compositions(d["kinds"]),
        # notebook 03
        "judge_confidence": lambda d: sel.plot_confidence_histograms(scores_03()),
        "compliance": lambda d: sel.plot_compliance(compliance_shares(scores_03())),
        # notebook 04
        "by_confidence": lambda d: unknown.plot_by_confidence(
            by_confidence(unknown_rows(), "refused_phrase", column="confidence_logprob"),
            "confidence from the log-probabilities of 0-10; refusal by phrase's rule",
        ),
        "uncertainty": lambda d: unknown.plot_uncertainty_histograms(unknown_rows()),
        # notebook 05
        "edit_metrics": lambda d: editing.plot_edit_metrics(edit_metrics_frame()),
        "consistency_by_group": lambda d: editing.plot_consistency_by_group(edit_metrics_frame()),
        # notebook 06
        "suite_confidence": lambda d: refusal.plot_confidence_histograms(
            suite_scores()[0], "tiny_steering_river"
        ),
        "suite_confidence_unscored_split": lambda d: refusal.plot_confidence_histograms(
            suite_scores(limit_drops=True)[0], "tiny"
        ),
        # a small limit: one prompt per split, the counts' axis still in whole prompts
        "suite_confidence_one_prompt_each": lambda d: refusal.plot_confidence_histograms(
            suite_scores(sizes=(1, 1, 1))[0], "tiny"
        ),
        "source_rates": lambda d: refusal.plot_source_rates(suite_scores()[1]),
        "source_rates_unscored_split": lambda d: refusal.plot_source_rates(
            suite_scores(limit_drops=True)[1]
        ),
        # notebooks 00 and 11, checked alike
        "taxonomy_levels": lambda d: taxonomy.plot_taxonomy_levels(small_bench()),
        "answer_lengths": lambda d: generation.plot_answer_lengths(answers()),
        "gate_tradeoff": lambda d: steering.plot_gate_tradeoff(*gate_curve()),
    }


#: Figures designed for a page's width (their docstrings say so): checked there.
PAGE_WIDE = {"against_release"}
#: Figures whose panels are compared: they share the scale of this axis.
SHARED = {
    "by_level": "y",
    "judge_confidence": "y",
    "atomic_vs_compositions": "x",
    "against_release": "x",
    "suite_confidence": "y",
    "suite_confidence_unscored_split": "y",
    "suite_confidence_one_prompt_each": "y",
    "source_rates": "x",
    "source_rates_unscored_split": "x",
    "gate_tradeoff": "y",
}
CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_figure_is_legible_at_its_paper_width(select, tmp_path, name):
    fig = CASES[name](select)
    assert not isinstance(fig, NoFigure), fig
    width = "page" if name in PAGE_WIDE else "column"
    assert legibility_problems(fig, tmp_path, name, width) == []
    if name in SHARED:
        assert len(limits(fig, SHARED[name])) == 1, limits(fig, SHARED[name])


def test_a_split_without_scored_prompts_keeps_its_panel_and_row(select, tmp_path):
    """A small ``limit`` can leave a split no scored prompt: the table lists it, so both
    figures show it and say so, never leaving it out."""
    from workbench.refusal.plots import plot_confidence_histograms, plot_source_rates

    scores, table = suite_scores(limit_drops=True)
    splits = list(dict.fromkeys(table.loc[table["system"] == "tiny", "split"]))
    assert (
        "sanity/may_refuse" in splits
        and scores.loc[scores["split"] == "sanity/may_refuse", "confidence"].isna().all()
    )
    fig = plot_confidence_histograms(scores, "tiny")
    panels = data_axes(fig)
    assert [ax.get_title().split("\n")[0] for ax in panels] == splits
    empty = panels[splits.index("sanity/may_refuse")]
    assert "0 of 3 prompts scored" in empty.get_title()
    assert any("no scored prompts" in t.get_text() for t in empty.texts)
    assert not empty.patches[1:]  # the band alone: no bars
    rates = plot_source_rates(table)
    ticks = [t.get_text() for t in data_axes(rates)[0].get_yticklabels()]
    assert ticks == splits
    assert any(t.get_text() == "none scored" for t in data_axes(rates)[0].texts)
    # a system whose every prompt is unscored says so instead of drawing empty panels
    unscored = scores.assign(confidence=np.nan)
    note = plot_confidence_histograms(unscored, "tiny")
    assert isinstance(note, NoFigure) and "sanity/may_refuse" in note.reason


def test_the_checks_fail_on_an_illegible_figure(tmp_path):
    """Each check catches what it is for, on a scratch figure that breaks every rule."""
    from workbench.plots.save import new_figure

    fig = new_figure("page", 3)
    left, right = fig.subplots(1, 2)
    left.bar([0, 1, 2], [1, 2, 1], color=["#c0504d", "#4c9f70", "#c0504d"])
    left.set_ylabel("prompts")
    left.set_yticks([0, 0.5, 1, 1.5, 2])
    left.set_title("a title far too long for half of a column's width, off its page", fontsize=9)
    right.bar([0, 1], [3, 4], color="#d9a53f")
    right.tick_params(labelsize=6)
    problems = legibility_problems(fig, tmp_path, "bad", "column")
    assert any("is 6 pt" in p for p in problems)
    assert any(p.startswith("off the page") for p in problems)
    assert any("'prompts' (y) has ticks [0.5, 1.5]" in p for p in problems)
    assert sum("is in no legend" in p for p in problems) == 3
    assert len(limits(fig, "y")) == 2  # not one scale


def test_the_suite_says_where_each_figure_went(tiny, tmp_path, monkeypatch, capsys):
    """Notebook 06 saves its figures inside ``suite.run()``: one ``saved:`` line each."""
    from workbench.refusal import SuiteConfig
    from workbench.refusal.suite import run_suite

    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path))
    config = SuiteConfig(
        name="said", models=("tiny",), limit=3, sampling={"preset": "greedy", "max_new_tokens": 4}
    )
    result = run_suite(config, models={"tiny": tiny}, progress=True)
    said = [line for line in capsys.readouterr().out.splitlines() if "saved: " in line]
    assert len(said) == 2 and len(result.figures) == 4  # c(x) of tiny, and the sources' rates
    for line, pair in zip(said, (result.figures[:2], result.figures[2:])):
        assert line.endswith("saved: " + ", ".join(str(p) for p in pair))
    from PIL import Image

    png = Image.open(result.figures[1])  # saved at a column's width, 200 dpi
    assert png.size[0] == 650
