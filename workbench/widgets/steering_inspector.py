"""Steering inspector: see where a concept lives in the model and what steering does.

For a picked concept it shows the per-layer related-vs-unrelated cosine gap, a histogram of the
validation similarities at one layer with its threshold, controls for the condition layers,
the viewed layer's threshold and the steering strength, whether the condition fires on a typed
question at each chosen layer, and the unsteered and steered answers side by side.

Everything shown is computed by the plain functions below; the widget class only wires them.
"""

from __future__ import annotations

import html
import io
from dataclasses import dataclass

import torch

from workbench.generation import GenerationConfig, generate
from workbench.steering import Condition, ConditionalSteerer, SteeringPlan, collect_activations
from workbench.steering.gate import LayerStats


def fig_to_png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def gap_figure(table: list[LayerStats], chosen: list[int]):
    """Mean related and unrelated similarity per layer, the gap shaded, chosen layers marked."""
    import matplotlib.pyplot as plt

    layers = [r.layer for r in table]
    fig, ax = plt.subplots(figsize=(6.4, 2.6))
    ax.plot(layers, [r.mean_related for r in table], marker="o", ms=3, label="related")
    ax.plot(layers, [r.mean_unrelated for r in table], marker="o", ms=3, label="unrelated")
    ax.fill_between(layers, [r.mean_unrelated for r in table], [r.mean_related for r in table], alpha=0.15)
    for layer in chosen:
        ax.axvline(layer, color="0.3", ls=":", lw=1)
    ax.set_xlabel("layer")
    ax.set_ylabel("mean cosine similarity")
    ax.set_title("validation similarity to the concept vector (dotted: condition layers)", fontsize=9)
    ax.legend(fontsize=8, frameon=False)
    return fig


def histogram_figure(related: torch.Tensor, unrelated: torch.Tensor, layer: int, threshold: float):
    """Histogram of validation similarities at one layer with the threshold drawn."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 2.4))
    bins = torch.linspace(min(related.min(), unrelated.min()).item() - 0.05,
                          max(related.max(), unrelated.max()).item() + 0.05, 21).tolist()
    ax.hist(related.tolist(), bins=bins, alpha=0.6, label="related")
    ax.hist(unrelated.tolist(), bins=bins, alpha=0.6, label="unrelated")
    ax.axvline(threshold, color="k", lw=1.5, label=f"threshold {threshold:.3f}")
    ax.set_xlabel(f"cosine similarity at layer {layer}")
    ax.set_ylabel("questions")
    ax.legend(fontsize=8, frameon=False)
    return fig


@dataclass(frozen=True)
class LayerVote:
    layer: int
    similarity: float
    threshold: float

    @property
    def fires(self) -> bool:
        return self.similarity > self.threshold


def condition_votes(lm, abstainer, question: str, layers: list[int], thresholds: dict[int, float]) -> list[LayerVote]:
    """The question's similarity and vote at each chosen layer."""
    if not layers:
        return []
    acts = collect_activations(lm, [question], layers)
    sims = abstainer.all_vectors.select(layers).similarities(acts)[0]
    return [LayerVote(l, float(s), thresholds[l]) for l, s in zip(layers, sims)]


def votes_html(votes: list[LayerVote], decision: bool) -> str:
    rows = "".join(f"<tr><td>{v.layer}</td><td>{v.similarity:+.3f}</td><td>{v.threshold:+.3f}</td>"
                   f"<td>{'fires' if v.fires else '-'}</td></tr>" for v in votes)
    verdict = "steer (about the concept)" if decision else "do not steer"
    return (f"<table><tr><th>layer</th><th>similarity</th><th>threshold</th><th></th></tr>{rows}</table>"
            f"<p><b>condition:</b> {verdict}</p>")


def build_steerer(abstainer, layers: list[int], thresholds: dict[int, float], strength: float,
                  aggregate: str) -> ConditionalSteerer:
    """A steerer from the inspector's current control values."""
    cond = Condition(abstainer.all_vectors.select(layers), [thresholds[l] for l in layers], aggregate)
    base = abstainer.steerer.plan
    return ConditionalSteerer(cond, SteeringPlan(base.layers, base.vectors, strength))


def compare_answers(lm, steerer: ConditionalSteerer, question: str, max_new_tokens: int = 48) -> tuple[str, str, bool]:
    """(unsteered answer, conditionally steered answer, whether the condition fired)."""
    cfg = GenerationConfig(max_new_tokens=max_new_tokens)
    plain = generate(lm, [question], cfg, progress=False)[0].text
    fired = bool(steerer.decide(lm, [question])[0])
    steered = steerer.generate(lm, [question], cfg, decisions=torch.tensor([fired]), progress=False)[0].text
    return plain, steered, fired


def answers_html(plain: str, steered: str, fired: bool) -> str:
    e = html.escape
    cell = "vertical-align:top;padding:4px 8px;border:1px solid #ccc;width:50%"
    return (f"<table style='width:100%'><tr><th>unsteered</th><th>steered{'' if fired else ' (condition did not fire)'}</th></tr>"
            f"<tr><td style='{cell}'>{e(plain)}</td><td style='{cell}'>{e(steered)}</td></tr></table>")


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
        self.thresholds: dict[int, float] = {}
        self.picker = ConceptPicker(bench, rows=6)
        self.prepare_button = w.Button(description="prepare steering", button_style="primary")
        self.status = w.HTML()
        n = lm.num_layers
        self.layers = w.SelectMultiple(options=list(range(n)), rows=6, description="condition layers")
        self.view_layer = w.IntSlider(min=0, max=n - 1, description="view layer")
        self.threshold = w.FloatSlider(min=-1.0, max=1.0, step=0.005, readout_format=".3f",
                                       description="threshold")
        self.strength = w.FloatSlider(value=float(getattr(self.technique.params, "strength", 0.6)),
                                      min=0.0, max=3.0, step=0.05, description="strength")
        self.aggregate = w.Dropdown(options=["majority", "all", "any"],
                                    value=getattr(self.technique.params, "aggregate", "majority"),
                                    description="vote")
        self.gap_image = w.Image(format="png")
        self.hist_image = w.Image(format="png")
        self.question = w.Text(placeholder="type a question", description="question",
                               layout=w.Layout(width="95%"))
        self.answer_button = w.Button(description="answer")
        self.votes = w.HTML()
        self.answers = w.HTML()
        self.prepare_button.on_click(lambda _: self.prepare(self.picker.results.value))
        self.view_layer.observe(lambda _: self._on_view_layer(), names="value")
        self.threshold.observe(lambda ch: self._on_threshold(ch["new"]), names="value")
        self.layers.observe(lambda _: self._refresh_gap(), names="value")
        self.question.observe(lambda _: self.update_votes(), names="value")
        self.answer_button.on_click(lambda _: self.answer())
        self.widget = w.VBox([
            w.HTML("<h3>Steering inspector</h3>"),
            self.picker.widget, w.HBox([self.prepare_button, self.status]),
            self.gap_image,
            w.HBox([self.layers, w.VBox([self.view_layer, self.threshold, self.strength, self.aggregate])]),
            self.hist_image,
            self.question, w.HBox([self.answer_button]), self.votes, self.answers,
        ])
        if concept is not None:
            self.prepare(concept)

    # -- actions --------------------------------------------------------------------------------
    def prepare(self, concept: str | None) -> None:
        if not concept:
            self.status.value = "pick a concept first"
            return
        self.status.value = f"preparing {html.escape(concept)} ..."
        name = self.bench.concept(concept).name
        if self.picker.results.value != concept:  # show the prepared concept in the picker
            self.picker.search.value = name
            if concept in [cid for _, cid in self.picker.results.options]:
                self.picker.results.value = concept
        self.abstainer = self.technique.prepare(self.lm, self.bench, concept,
                                                **({"store": self.store} if self.store else {}))
        cond = self.abstainer.steerer.condition
        self.thresholds = {row.layer: row.threshold for row in self.abstainer.table}
        self.thresholds.update(dict(zip(cond.layers, cond.thresholds)))
        self.layers.value = tuple(cond.layers)
        self.view_layer.value = cond.layers[0]
        self._on_view_layer()
        self._refresh_gap()
        self.status.value = f"ready: <b>{html.escape(self.bench.concept(concept).name)}</b>"

    def _on_view_layer(self) -> None:
        if self.abstainer is None:
            return
        layer = self.view_layer.value
        self.threshold.value = self.thresholds[layer]
        self._refresh_hist()

    def _on_threshold(self, value: float) -> None:
        if self.abstainer is None:
            return
        self.thresholds[self.view_layer.value] = float(value)
        self._refresh_hist()
        self.update_votes()

    def _refresh_gap(self) -> None:
        if self.abstainer is not None:
            self.gap_image.value = fig_to_png(gap_figure(self.abstainer.table, list(self.layers.value)))

    def _refresh_hist(self) -> None:
        v, layer = self.abstainer.validation, self.view_layer.value
        self.hist_image.value = fig_to_png(histogram_figure(
            v["related"][:, layer], v["unrelated"][:, layer], layer, self.thresholds[layer]))

    def steerer(self) -> ConditionalSteerer:
        return build_steerer(self.abstainer, sorted(self.layers.value), self.thresholds,
                             self.strength.value, self.aggregate.value)

    def update_votes(self) -> None:
        if self.abstainer is None or not self.question.value.strip() or not self.layers.value:
            self.votes.value = ""
            return
        layers = sorted(self.layers.value)
        votes = condition_votes(self.lm, self.abstainer, self.question.value, layers, self.thresholds)
        decision = bool(self.steerer().condition.decide(
            collect_activations(self.lm, [self.question.value], layers))[0])
        self.votes.value = votes_html(votes, decision)

    def answer(self) -> None:
        if self.abstainer is None or not self.question.value.strip():
            return
        plain, steered, fired = compare_answers(self.lm, self.steerer(), self.question.value)
        self.answers.value = answers_html(plain, steered, fired)

    def _ipython_display_(self):  # pragma: no cover - needs a front end
        from IPython.display import display

        display(self.widget)
