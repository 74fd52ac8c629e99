"""Steering inspector: see where a concept lives in the model and what steering does.

For a picked concept it shows, per layer, how well the concept vector separates related from
unrelated validation questions (mean similarities, AUROC, cos(PC1, mean difference)), a
histogram of the validation similarities at one layer with its threshold, controls for the
condition layers, thresholds, vote rule and steering strength, how a typed question votes, and
the unsteered and steered answers side by side, each labelled with the settings that made it.

Safe under real use: JupyterLab may deliver widget events on two kernel threads, so every use of
the model holds one lock, figures are drawn without pyplot's global state, and each control
refreshes every view that depends on it (answers made under other settings are marked stale).
Everything shown is computed by the plain functions below; the class only wires them.
"""

from __future__ import annotations

import html
import io
import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from workbench.generation import GenerationConfig, generate
from workbench.plots.save import new_figure
from workbench.steering import (
    Condition,
    ConditionalSteerer,
    SteeringPlan,
    collect_activations,
)
from workbench.steering.gate import LayerStats

#: Image size in pixels; figures are drawn at exactly this size (no stretching).
PLOT_PX = (620, 230)
DPI = 100


def fig_to_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def gap_figure(table: list[LayerStats], chosen: list[int], behavior: list[int] | None = None):
    """Mean related and unrelated validation similarity per layer: the gap shaded green where
    related questions score higher, red where lower; condition layers dotted, behaviour layers
    (where the refusal vector is added) dashed; validation AUROC on a second axis."""
    layers = [r.layer for r in table]
    rel = [r.mean_related for r in table]
    unrel = [r.mean_unrelated for r in table]
    fig = new_figure(PLOT_PX[0] / DPI, PLOT_PX[1] / DPI)
    ax = fig.subplots()
    ax.plot(layers, rel, marker="o", ms=3, label="related")
    ax.plot(layers, unrel, marker="o", ms=3, label="unrelated")
    above = [r >= u for r, u in zip(rel, unrel)]
    ax.fill_between(layers, unrel, rel, where=above, interpolate=True, color="tab:green", alpha=0.15)
    ax.fill_between(layers, unrel, rel, where=[not a for a in above], interpolate=True,
                    color="tab:red", alpha=0.15)
    for layer in chosen:
        ax.axvline(layer, color="0.2", ls=":", lw=1.2)
    for layer in behavior or []:
        ax.axvline(layer, color="tab:purple", ls="--", lw=1)
    if table and table[0].auroc == table[0].auroc:
        ax2 = ax.twinx()
        ax2.plot(layers, [r.auroc for r in table], color="0.5", lw=1, label="AUROC")
        ax2.set_ylim(0, 1)
        ax2.set_ylabel("AUROC", fontsize=8)
    ax.set_xlabel("layer")
    ax.set_ylabel("mean cosine")
    ax.set_title("validation similarity (dotted: condition layers; dashed: steering layers)", fontsize=8)
    ax.legend(fontsize=7, frameon=False, loc="upper left")
    return fig


def histogram_figure(related: torch.Tensor, unrelated: torch.Tensor, layer: int, threshold: float):
    """Histogram of validation similarities at one layer with the threshold drawn."""
    fig = new_figure(PLOT_PX[0] / DPI, PLOT_PX[1] / DPI)
    ax = fig.subplots()
    bins = torch.linspace(min(related.min(), unrelated.min()).item() - 0.05,
                          max(related.max(), unrelated.max()).item() + 0.05, 21).tolist()
    ax.hist(related.tolist(), bins=bins, alpha=0.6, label=f"related (n={len(related)})")
    ax.hist(unrelated.tolist(), bins=bins, alpha=0.6, label=f"unrelated (n={len(unrelated)})")
    ax.axvline(threshold, color="k", lw=1.5, label=f"threshold {threshold:.3f}")
    ax.set_xlabel(f"cosine similarity at layer {layer}")
    ax.set_ylabel("questions")
    ax.legend(fontsize=7, frameon=False)
    return fig


def slider_range(related: torch.Tensor, unrelated: torch.Tensor, threshold: float,
                 margin: float = 0.05) -> tuple[float, float]:
    """The threshold slider's range at one layer: the validation similarities (and the current
    threshold) plus a margin, within [-1, 1], so each pixel of the slider is a fine step."""
    lo = min(float(related.min()), float(unrelated.min()), threshold) - margin
    hi = max(float(related.max()), float(unrelated.max()), threshold) + margin
    return max(-1.0, round(lo, 2)), min(1.0, round(hi, 2))


@dataclass(frozen=True)
class LayerVote:
    layer: int
    similarity: float
    threshold: float

    @property
    def fires(self) -> bool:
        return self.similarity > self.threshold


@dataclass(frozen=True)
class Settings:
    """What a vote or an answer was computed with (shown beside it)."""

    concept: str
    layers: tuple[int, ...]
    thresholds: tuple[float, ...]
    aggregate: str
    strength: float

    def describe(self) -> str:
        thr = ", ".join(f"{l}: {t:+.3f}" for l, t in zip(self.layers, self.thresholds))
        return (f"concept {self.concept}; condition layers {{{thr}}}; vote {self.aggregate}; "
                f"strength {self.strength:.2f}")


def condition_votes(lm, abstainer, question: str, layers: list[int], thresholds: dict[int, float]) -> list[LayerVote]:
    """The question's similarity and vote at each chosen layer."""
    if not layers:
        return []
    acts = collect_activations(lm, [question], layers)
    sims = abstainer.all_vectors.select(layers).similarities(acts)[0]
    return [LayerVote(l, float(s), thresholds[l]) for l, s in zip(layers, sims)]


def votes_html(votes: list[LayerVote], decision: bool, settings: Settings | None = None) -> str:
    rows = "".join(f"<tr><td>{v.layer}</td><td>{v.similarity:+.3f}</td><td>{v.threshold:+.3f}</td>"
                   f"<td>{'fires' if v.fires else '-'}</td></tr>" for v in votes)
    verdict = "steer (about the concept)" if decision else "do not steer"
    rule = f" by vote <i>{settings.aggregate}</i>" if settings else ""
    return (f"<table><tr><th>layer</th><th>similarity</th><th>threshold</th><th></th></tr>{rows}</table>"
            f"<p><b>condition{rule}:</b> {verdict}</p>")


def build_steerer(abstainer, layers: list[int], thresholds: dict[int, float], strength: float,
                  aggregate: str) -> ConditionalSteerer:
    """A steerer from the inspector's current control values."""
    cond = Condition(abstainer.all_vectors.select(layers), [thresholds[l] for l in layers], aggregate)
    base = abstainer.steerer.plan
    return ConditionalSteerer(cond, SteeringPlan(base.layers, base.vectors, strength))


def compare_answers(lm, steerer: ConditionalSteerer, question: str, max_new_tokens: int = 48,
                    step: Callable[[str], None] | None = None) -> tuple[str, str, bool]:
    """(unsteered answer, conditionally steered answer, whether the condition fired)."""
    cfg = GenerationConfig(max_new_tokens=max_new_tokens)
    step and step("deciding")
    fired = bool(steerer.decide(lm, [question])[0])
    step and step("generating the unsteered answer")
    plain = generate(lm, [question], cfg, progress=False)[0].text
    step and step("generating the steered answer")
    steered = steerer.generate(lm, [question], cfg, decisions=torch.tensor([fired]), progress=False)[0].text
    return plain, steered, fired


def answers_html(plain: str, steered: str, fired: bool, settings: Settings | None = None,
                 stale: bool = False) -> str:
    e = html.escape
    cell = "vertical-align:top;padding:4px 8px;border:1px solid #ccc;width:50%"
    label = ("steered" if fired else "not steered: the condition did not fire")
    note = f"<p style='font-size:90%;color:#555'>made with {e(settings.describe())}</p>" if settings else ""
    if stale:
        note += "<p style='color:#b35900'><b>settings changed since this answer: press 'answer' again</b></p>"
    return (f"<table style='width:100%'><tr><th>unsteered</th><th>{label}</th></tr>"
            f"<tr><td style='{cell}'>{e(plain)}</td><td style='{cell}'>{e(steered)}</td></tr></table>{note}")


class SteeringInspector:
    """Pick a concept, inspect its concept vectors, tune the condition, try questions."""

    def __init__(self, lm, bench, concept: str | None = None, technique=None, store=None):
        import ipywidgets as w

        from workbench.techniques import get_technique
        from workbench.widgets.concept_picker import ConceptPicker

        self.lm, self.bench = lm, bench
        self.technique = technique or get_technique("steering")
        self.store = store
        self.abstainer = None
        self.concept: str | None = None
        self.thresholds: dict[int, float] = {}
        self._lock = threading.RLock()  # one user of the model at a time, whichever kernel thread
        self._answer: tuple | None = None  # (plain, steered, fired, settings)
        wide = {"description_width": "initial"}
        self.picker = ConceptPicker(bench, rows=6, pick=False)
        self.prepare_button = w.Button(description="prepare steering", button_style="primary")
        self.status = w.HTML()
        self.busy = w.IntProgress(value=0, min=0, max=3, layout=w.Layout(width="160px", visibility="hidden"))
        n = lm.num_layers
        self.layers = w.SelectMultiple(options=list(range(n)), rows=8, description="condition layers",
                                       style=wide, layout=w.Layout(width="220px"))
        self.view_layer = w.IntSlider(min=0, max=n - 1, description="view layer", style=wide,
                                      layout=w.Layout(width="420px"))
        self.threshold = w.FloatSlider(min=-1.0, max=1.0, step=0.001, readout_format=".3f",
                                       description="threshold", style=wide, continuous_update=False,
                                       layout=w.Layout(width="420px"))
        self.strength = w.FloatSlider(value=float(getattr(self.technique.params, "strength", 0.6)),
                                      min=0.0, max=3.0, step=0.05, description="strength", style=wide,
                                      continuous_update=False, layout=w.Layout(width="420px"))
        self.aggregate = w.Dropdown(options=["all", "majority", "any"],
                                    value=getattr(self.technique.params, "aggregate", "all"),
                                    description="vote", style=wide)
        self.behavior = w.HTML()
        self.gap_image = w.Image(format="png", width=PLOT_PX[0], height=PLOT_PX[1])
        self.hist_image = w.Image(format="png", width=PLOT_PX[0], height=PLOT_PX[1])
        self.question = w.Text(placeholder="type a question", description="question", style=wide,
                               continuous_update=False, layout=w.Layout(width="95%"))
        self.answer_button = w.Button(description="answer")
        self.votes = w.HTML()
        self.answers = w.HTML()
        self.prepare_button.on_click(lambda _: self.prepare(self.picker.selected))
        self.view_layer.observe(lambda _: self._on_view_layer(), names="value")
        self.threshold.observe(lambda ch: self._on_threshold(ch["new"]), names="value")
        for control in (self.layers, self.aggregate, self.strength):
            control.observe(lambda _: self.refresh(), names="value")
        self.question.observe(lambda _: self.refresh(), names="value")
        self.answer_button.on_click(lambda _: self.answer())
        controls = w.VBox([self.view_layer, self.threshold, self.strength, self.aggregate, self.behavior])
        self.widget = w.VBox([
            w.HTML("<h3>Steering inspector</h3>"),
            self.picker.widget, w.HBox([self.prepare_button, self.busy, self.status]),
            w.HBox([w.VBox([self.gap_image, self.hist_image]), w.VBox([self.layers, controls])]),
            self.question, w.HBox([self.answer_button]), self.votes, self.answers,
        ])
        if concept is not None:
            self.prepare(concept)

    # -- state ----------------------------------------------------------------------------------
    @contextmanager
    def _working(self, what: str, steps: int = 3):
        """Hold the model, disable the buttons and show progress while ``what`` runs."""
        with self._lock:
            self.prepare_button.disabled = self.answer_button.disabled = True
            self.busy.max, self.busy.value = steps, 0
            self.busy.layout.visibility = "visible"
            self.status.value = f"<i>{html.escape(what)} ...</i>"
            try:
                yield self._step
            finally:
                self.prepare_button.disabled = self.answer_button.disabled = False
                self.busy.layout.visibility = "hidden"

    def _step(self, label: str) -> None:
        self.busy.value = min(self.busy.max, self.busy.value + 1)
        self.status.value = f"<i>{html.escape(label)} ...</i>"

    def settings(self) -> Settings:
        layers = tuple(sorted(self.layers.value))
        concept = f"{self.bench.concept(self.concept).name} ({self.concept})" if self.concept else ""
        return Settings(concept, layers, tuple(self.thresholds[l] for l in layers),
                        self.aggregate.value, float(self.strength.value))

    # -- actions --------------------------------------------------------------------------------
    def prepare(self, concept: str | None) -> None:
        if not concept:
            self.status.value = "select a concept in the list first"
            return
        name = self.bench.concept(concept).name
        with self._working(f"preparing {name}") as step:
            step("activations, concept vectors and the gate")
            abstainer = self.technique.prepare(self.lm, self.bench, concept,
                                               **({"store": self.store} if self.store else {}))
            cond = abstainer.steerer.condition
            self.abstainer, self.concept, self._answer = abstainer, concept, None
            self.thresholds = {row.layer: row.threshold for row in abstainer.table}
            self.thresholds.update(dict(zip(cond.layers, cond.thresholds)))
            step("drawing")
            with self._holding():
                self.layers.value = tuple(cond.layers)
                self.aggregate.value = cond.aggregate
                self.view_layer.value = cond.layers[0]
                self._set_threshold_slider()
            behavior = abstainer.steerer.plan.layers
            self.behavior.value = (f"<small>steering adds the refusal vector at layers "
                                   f"{', '.join(map(str, behavior))}; the gate decides first, so "
                                   "condition layers may sit at any depth</small>")
            self.answers.value = ""
            self.refresh()
        self.status.value = f"ready: <b>{html.escape(name)}</b> <code>{html.escape(concept)}</code>"

    @contextmanager
    def _holding(self):
        """Set several controls without each one triggering a refresh."""
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = False

    def _on_view_layer(self) -> None:
        if self.abstainer is None or getattr(self, "_quiet", False):
            return
        with self._holding():
            self._set_threshold_slider()
        self.refresh()

    def _set_threshold_slider(self) -> None:
        """Fit the slider to the viewed layer's similarities, then show that layer's threshold."""
        layer, v = self.view_layer.value, self.abstainer.validation
        value = self.thresholds[layer]
        lo, hi = slider_range(v["related"][:, layer], v["unrelated"][:, layer], value)
        # widen first, so that neither bound ever crosses the current value
        self.threshold.min, self.threshold.max = -1.0, 1.0
        self.threshold.value = value
        self.threshold.min, self.threshold.max = lo, hi

    def _on_threshold(self, value: float) -> None:
        if self.abstainer is None or getattr(self, "_quiet", False):
            return
        self.thresholds[self.view_layer.value] = float(value)
        self.refresh()

    def refresh(self) -> None:
        """Redraw every view from the current settings: plots, votes, the answer's label."""
        if self.abstainer is None or getattr(self, "_quiet", False):
            return
        with self._lock:
            v, layer = self.abstainer.validation, self.view_layer.value
            self.gap_image.value = fig_to_png(gap_figure(self.abstainer.table, sorted(self.layers.value),
                                                         self.abstainer.steerer.plan.layers))
            self.hist_image.value = fig_to_png(histogram_figure(
                v["related"][:, layer], v["unrelated"][:, layer], layer, self.thresholds[layer]))
            self.update_votes()
            if self._answer is not None:
                plain, steered, fired, made = self._answer
                self.answers.value = answers_html(plain, steered, fired, made, stale=made != self.settings())

    def steerer(self) -> ConditionalSteerer:
        return build_steerer(self.abstainer, sorted(self.layers.value), self.thresholds,
                             self.strength.value, self.aggregate.value)

    def update_votes(self) -> None:
        if self.abstainer is None or not self.question.value.strip() or not self.layers.value:
            self.votes.value = ""
            return
        with self._lock:
            layers = sorted(self.layers.value)
            votes = condition_votes(self.lm, self.abstainer, self.question.value, layers, self.thresholds)
            steerer = self.steerer()
            decision = bool(steerer.condition.combine(torch.tensor([[v.fires for v in votes]]))[0])
            self.votes.value = votes_html(votes, decision, self.settings())

    def answer(self) -> None:
        if self.abstainer is None or not self.question.value.strip() or not self.layers.value:
            self.answers.value = "<i>prepare a concept, choose condition layers and type a question</i>"
            return
        with self._working("answering", steps=3) as step:
            made = self.settings()
            plain, steered, fired = compare_answers(self.lm, self.steerer(), self.question.value, step=step)
            self._answer = (plain, steered, fired, made)
            self.answers.value = answers_html(plain, steered, fired, made, stale=made != self.settings())
        self.status.value = f"ready: <b>{html.escape(self.bench.concept(self.concept).name)}</b>"

    def _ipython_display_(self):  # pragma: no cover - needs a front end
        from IPython.display import display

        display(self.widget)
