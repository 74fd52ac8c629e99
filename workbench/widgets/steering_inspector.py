"""Steering inspector: see where a concept lives in the model and what steering does.

For a picked concept it shows, per layer, how well the concept vector separates related from
unrelated validation questions (mean similarities, AUROC, cos(PC1, mean difference)), a
histogram of the validation similarities at one layer with its threshold, controls for the
condition layers, thresholds, vote rule and steering strength, how a typed question votes, and
the unsteered and steered answers side by side, each labelled with the settings that made it.

Safe under real use: JupyterLab may deliver widget events on two kernel threads, so every use of
the model holds one lock, figures are drawn without pyplot's global state, and each control
refreshes every view that depends on it (answers made under other settings are marked stale).
Everything shown is computed by the plain functions of :mod:`workbench.widgets.inspector`; this
module holds the widget that wires them (layout, events, the lock and the busy state) and
:func:`open_inspector`, the notebook's start-up. The names below are imported here, so that this
module's old names keep working and so that replacing ``compare_answers`` or ``condition_votes``
on this module (as the tests do) replaces what the widget calls.
"""

from __future__ import annotations

import html
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch

from workbench.steering import ConditionalSteerer
from workbench.widgets.inspector.plots import (
    DPI,
    LEGEND_PT,
    PLOT_IN,
    PLOT_MAX_PX,
    fig_to_png,
    gap_figure,
    histogram_figure,
)
from workbench.widgets.inspector.startup import StartupStatus
from workbench.widgets.inspector.state import (
    Answer,
    LayerVote,
    Settings,
    nearest_voting_layer,
    slider_range,
    stale_reason,
)
from workbench.widgets.inspector.steering import build_steerer, compare_answers, condition_votes
from workbench.widgets.inspector.views import (
    answers_html,
    plot_caption_html,
    view_note_html,
    votes_html,
)

if TYPE_CHECKING:
    from workbench.generation.backend import Backend
    from workbench.taxonomy.benchmark import Benchmark

__all__ = [
    "DPI",
    "LEGEND_PT",
    "PLOT_IN",
    "PLOT_MAX_PX",
    "Answer",
    "LayerVote",
    "Settings",
    "StartupStatus",
    "SteeringInspector",
    "answers_html",
    "build_steerer",
    "compare_answers",
    "condition_votes",
    "fig_to_png",
    "gap_figure",
    "histogram_figure",
    "nearest_voting_layer",
    "open_inspector",
    "plot_caption_html",
    "slider_range",
    "stale_reason",
    "view_note_html",
    "votes_html",
]


class SteeringInspector:
    """Pick a concept, inspect its concept vectors, tune the condition, try questions."""

    #: Seconds after an answer arrives during which another click on "answer" for the same
    #: question and settings is taken as the second half of a double click and ignored.
    debounce_s = 1.0
    #: JupyterLab may deliver a click on "prepare steering" made while the kernel is busy *before*
    #: the concept picked just before it (the pick waits behind the running work). A prepare asked
    #: for while busy therefore takes the next pick that arrives while busy or within this many
    #: seconds after the work ends.
    pick_grace_s = 2.0

    def __init__(
        self,
        lm: Backend,
        bench: Benchmark,
        concept: str | None = None,
        technique=None,
        store=None,
        startup: StartupStatus | None = None,
    ):
        """``startup``: where the preparation of ``concept`` says what it is doing before the
        widget is on screen (default: a new status line, in a notebook)."""
        import ipywidgets as w

        from workbench.techniques import get_technique
        from workbench.widgets.concept_picker import ConceptPicker

        self.lm, self.bench = lm, bench
        self.technique = technique or get_technique("steering")
        self.store = store
        self.abstainer: Any = None  # the steering abstainer: its steerer, table, validation
        self.concept: str | None = None
        self.thresholds: dict[int, float] = {}
        self._lock = threading.RLock()  # one user of the model at a time, whichever kernel thread
        self._state = threading.Lock()  # guards _busy and _queued (never held while computing)
        self._busy: str | None = None  # what is running ("answering", "preparing ..."), if anything
        self._queued: str | None = None  # a concept to prepare once the running work finishes
        self._wants_pick = (
            False  # a prepare asked for while busy takes the next pick (see pick_grace_s)
        )
        self._wants_pick_until = float("inf")
        self._note = ""  # a remark shown before the status (ignored click, queued concept)
        self._main_status = ""
        self._answer: Answer | None = None
        self._answered_at = float("-inf")
        self._answers_made = 0
        self._startup: StartupStatus | None = None  # the start-up's status line while it prepares
        wide = {"description_width": "initial"}
        self.picker = ConceptPicker(bench, rows=5, pick=False)
        # the concept card: shorter, scrolling, so the controls stay on screen
        self.picker.details.layout = w.Layout(max_height="110px", overflow="auto")
        self.prepare_button = w.Button(description="prepare steering", button_style="primary")
        self.status = w.HTML()
        self.busy = w.IntProgress(
            value=0, min=0, max=3, layout=w.Layout(width="160px", visibility="hidden")
        )
        n = lm.num_layers
        self.layers = w.SelectMultiple(
            options=list(range(n)),
            rows=7,
            description="condition layers",
            style=wide,
            layout=w.Layout(width="190px"),
        )
        self.view_layer = w.IntSlider(
            min=0, max=n - 1, description="view layer", style=wide, layout=w.Layout(width="400px")
        )
        self.threshold = w.FloatSlider(
            min=-1.0,
            max=1.0,
            step=0.001,
            readout_format=".3f",
            description="threshold",
            style=wide,
            continuous_update=False,
            layout=w.Layout(width="400px"),
        )
        self.view_note = w.HTML()
        self.strength = w.FloatSlider(
            value=float(getattr(self.technique.params, "strength", 0.6)),
            min=0.0,
            max=3.0,
            step=0.05,
            description="strength",
            style=wide,
            continuous_update=False,
            layout=w.Layout(width="400px"),
        )
        self.aggregate = w.Dropdown(
            options=["all", "majority", "any"],
            value=getattr(self.technique.params, "aggregate", "all"),
            description="vote",
            style=wide,
        )
        self.behavior = w.HTML()
        plot_layout = dict(width="100%", max_width=f"{PLOT_MAX_PX}px", height="auto")
        self.gap_image = w.Image(format="png", layout=w.Layout(**plot_layout))
        self.hist_image = w.Image(format="png", layout=w.Layout(**plot_layout))
        self.plot_caption = (
            w.HTML()
        )  # which concept and layer the plots show (an Image has no title)
        self.question = w.Text(
            placeholder="type a question",
            description="question",
            style=wide,
            continuous_update=False,
            layout=w.Layout(width="95%"),
        )
        self.answer_button = w.Button(description="answer")
        self.votes = w.HTML()
        self.answers = w.HTML()
        self.prepare_button.on_click(lambda _: self.prepare(self.picker.selected))
        self.picker.results.observe(lambda ch: self._on_pick(ch["new"]), names="value")
        self.view_layer.observe(lambda _: self._on_view_layer(), names="value")
        self.threshold.observe(lambda ch: self._on_threshold(ch["new"]), names="value")
        self.layers.observe(lambda _: self._on_layers(), names="value")
        for control in (self.aggregate, self.strength):
            control.observe(lambda _: self.refresh(), names="value")
        self.question.observe(lambda _: self._on_question(), names="value")
        self.answer_button.on_click(lambda _: self.answer())
        picker = w.VBox(
            [
                self.picker.widget.children[0],
                self.picker.note,
                self.picker.results,
                self.picker.details,
            ]
        )
        controls = w.VBox(
            [
                w.HBox(
                    [
                        self.layers,
                        w.VBox(
                            [
                                self.view_layer,
                                self.threshold,
                                self.view_note,
                                self.strength,
                                self.aggregate,
                            ]
                        ),
                    ]
                ),
                self.behavior,
            ],
            layout=w.Layout(flex="0 1 600px"),
        )
        plots = w.VBox(
            [self.plot_caption, self.gap_image, self.hist_image],
            layout=w.Layout(flex="1 1 420px", max_width=f"{PLOT_MAX_PX}px"),
        )
        self.widget = w.VBox(
            [
                w.HTML("<h3 style='margin:2px 0'>Steering inspector</h3>"),
                picker,
                w.HBox([self.prepare_button, self.busy, self.status]),
                w.HBox([controls, plots], layout=w.Layout(flex_flow="row wrap", width="100%")),
                self.question,
                w.HBox([self.answer_button]),
                self.votes,
                self.answers,
            ]
        )
        if concept is not None:
            own = startup is None
            self._startup = StartupStatus() if own else startup
            started = time.monotonic()
            try:
                self.prepare(concept)
            finally:
                self._startup, status = None, self._startup
            if own and status is not None:
                status.show(f"{self._name(concept)} ready in {time.monotonic() - started:.1f} s")

    # -- state ----------------------------------------------------------------------------------
    def _set_status(self, main: str | None = None, note: str | None = None) -> None:
        """Show ``note`` (a remark: an ignored click, a queued concept) before the main status."""
        if main is not None:
            self._main_status = main
        if note is not None:
            self._note = note
        remark = f"<span style='color:#b35900'>{self._note}</span> · " if self._note else ""
        self.status.value = remark + self._main_status
        if self._startup is not None:  # the widget is not on screen yet: say what is loading
            self._startup.show(html.unescape(_strip_tags(self.status.value)))

    def _claim(self, what: str) -> bool:
        """Mark the inspector busy with ``what``; False (nothing changes) when it already is."""
        with self._state:
            if self._busy is not None:
                return False
            if self._wants_pick and time.monotonic() >= self._wants_pick_until:
                self._wants_pick = False  # no pick came in time: later picks are plain picks
            self._busy = what
            return True

    def _release(self) -> str | None:
        """Mark the inspector idle; the concept queued meanwhile (taken off the queue), if any."""
        with self._state:
            self._busy, queued, self._queued = None, self._queued, None
            self._wants_pick_until = time.monotonic() + self.pick_grace_s
            return queued

    @contextmanager
    def _working(self, what: str, steps: int = 3):
        """Hold the model, show progress while ``what`` runs; "answer" waits, "prepare" queues."""
        with self._lock:
            self.answer_button.disabled = True
            self.busy.max, self.busy.value = steps, 0
            self.busy.layout.visibility = "visible"
            self._set_status(f"<i>{html.escape(what)} ...</i>")
            try:
                yield self._step
            finally:
                self.answer_button.disabled = False
                self.busy.layout.visibility = "hidden"

    def _step(self, label: str) -> None:
        self.busy.value = min(self.busy.max, self.busy.value + 1)
        self._set_status(f"<i>{html.escape(label)} ...</i>")

    def _name(self, concept: str) -> str:
        return self.bench.concept(concept).name

    def settings(self) -> Settings:
        layers = tuple(sorted(self.layers.value))
        concept = f"{self._name(self.concept)} ({self.concept})" if self.concept else ""
        return Settings(
            concept,
            layers,
            tuple(self.thresholds[l] for l in layers),
            self.aggregate.value,
            float(self.strength.value),
        )

    # -- actions --------------------------------------------------------------------------------
    def prepare(self, concept: str | None) -> None:
        """Prepare ``concept``; while an answer (or another prepare) runs, queue it instead, to be
        prepared as soon as that finishes, and say so. Asked for while busy, a concept picked in
        the list just before the click may still be on its way: the next pick replaces the queued
        concept (or, with none selected yet, is queued), so the click is never lost."""
        if not concept:
            with self._state:
                busy = self._busy
                self._wants_pick = self._wants_pick or busy is not None
            if busy:
                self._set_status(
                    note=f"prepare asked for while {html.escape(busy)}: the concept picked "
                    "in the list is prepared when that finishes"
                )
            else:
                self._set_status(note="select a concept in the list first")
            return
        name = self._name(concept)
        if not self._claim(f"preparing {name}"):
            with self._state:
                self._queued = concept
                self._wants_pick = True  # a newer pick may still be on its way
                busy = self._busy
            self._set_status(
                note=f"queued: {html.escape(name)} will be prepared when {html.escape(busy or 'the work')} "
                f"finishes (plots still show the previous concept)"
            )
            return
        try:
            self._prepare(concept, name)
        finally:
            queued = self._release()
        if queued and queued != self.concept:
            self.prepare(queued)

    def _prepare(self, concept: str, name: str) -> None:
        self._note = ""
        with self._working(f"loading {name}") as step:
            step(
                f"loading {name}: activations, concept vectors and the gate (the first time takes longest)"
            )
            abstainer: Any = self.technique.prepare(
                self.lm, self.bench, concept, **({"store": self.store} if self.store else {})
            )
            cond = abstainer.steerer.condition
            self.abstainer, self.concept, self._answer = abstainer, concept, None
            self.thresholds = {row.layer: row.threshold for row in abstainer.table}
            self.thresholds.update(dict(zip(cond.layers, cond.thresholds)))
            step(f"loading {name}: drawing")
            with self._holding():
                self.layers.value = tuple(cond.layers)
                self.aggregate.value = cond.aggregate
                self.view_layer.value = cond.layers[0]
                self._set_threshold_slider()
            behavior = abstainer.steerer.plan.layers
            self.behavior.value = (
                f"<small>steering adds the refusal vector at layers "
                f"{', '.join(map(str, behavior))}; the gate decides first, so "
                "condition layers may sit at any depth</small>"
            )
            self.answers.value = ""
            self.refresh()
        self._set_status(
            f"ready: <b>{html.escape(name)}</b> <code>{html.escape(concept)}</code>", note=""
        )

    def _on_pick(self, concept: str | None) -> None:
        """A concept clicked in the picker: prepared (or queued) if a prepare asked for while busy
        is waiting for it; otherwise say plainly that it is not applied until prepared."""
        with self._state:
            busy = self._busy
            wanted = (
                bool(concept)
                and self._wants_pick
                and (busy is not None or time.monotonic() < self._wants_pick_until)
            )
            if wanted:
                self._wants_pick = False
        if wanted and concept != self.concept:
            self.prepare(concept)
            return
        if not concept or concept == self.concept:
            self._set_status(note="")
            return
        name = html.escape(self._name(concept))
        if busy:
            self._set_status(
                note=f"picked {name} while {html.escape(busy)}: press 'prepare steering' "
                "to queue it; plots and answers are for the previous concept"
            )
        else:
            self._set_status(note=f"picked {name}: press 'prepare steering' to apply it")

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

    def _on_layers(self) -> None:
        """Condition layers changed: if the viewed layer no longer votes, view the nearest one
        that does, so that the threshold slider always acts on the vote."""
        if self.abstainer is None or getattr(self, "_quiet", False):
            return
        layers = sorted(self.layers.value)
        target = nearest_voting_layer(self.view_layer.value, layers)
        if (
            target is not None
            and target != self.view_layer.value
            and self.view_layer.value not in layers
        ):
            with self._holding():
                self.view_layer.value = target
                self._set_threshold_slider()
        self.refresh()

    def _on_question(self) -> None:
        """A new question: its votes, and the answer shown marked stale (no plots to redraw)."""
        if self.abstainer is None or getattr(self, "_quiet", False):
            return
        with self._lock:
            self.update_votes()
            self._show_answer()

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
            layers = sorted(self.layers.value)
            self.view_note.value = view_note_html(layer, layers)
            assert self.concept is not None  # drawn only once a concept is prepared
            name = self._name(self.concept)
            self.gap_image.value = fig_to_png(
                gap_figure(
                    self.abstainer.table, layers, self.abstainer.steerer.plan.layers, concept=name
                )
            )
            self.hist_image.value = fig_to_png(
                histogram_figure(
                    v["related"][:, layer],
                    v["unrelated"][:, layer],
                    layer,
                    self.thresholds[layer],
                    votes=layer in layers,
                )
            )
            self.plot_caption.value = plot_caption_html(name, self.concept, layer, layer in layers)
            self.update_votes()
            self._show_answer()

    def _show_answer(self) -> None:
        if self._answer is not None:
            self.answers.value = answers_html(self._answer, self.stale())

    def stale(self) -> str | None:
        """What changed since the answer shown ("question", "settings", both), or None."""
        if self._answer is None:
            return None
        return stale_reason(self._answer, self.question.value, self.settings())

    def steerer(self) -> ConditionalSteerer:
        return build_steerer(
            self.abstainer,
            sorted(self.layers.value),
            self.thresholds,
            self.strength.value,
            self.aggregate.value,
        )

    def update_votes(self) -> None:
        if self.abstainer is None or not self.question.value.strip() or not self.layers.value:
            self.votes.value = ""
            return
        with self._lock:
            layers = sorted(self.layers.value)
            votes = condition_votes(
                self.lm, self.abstainer, self.question.value, layers, self.thresholds
            )
            steerer = self.steerer()
            assert steerer.condition is not None  # the inspector's steerer always has a gate
            decision = bool(steerer.condition.combine(torch.tensor([[v.fires for v in votes]]))[0])
            self.votes.value = votes_html(votes, decision, self.settings())

    def answer(self) -> None:
        """One answer per click: a click while busy is ignored (the status says so), and so is a
        second click right after an answer for the same question and settings (a double click)."""
        if self.abstainer is None or not self.question.value.strip() or not self.layers.value:
            self.answers.value = (
                "<i>prepare a concept, choose condition layers and type a question</i>"
            )
            return
        if not self._claim("answering"):
            with self._state:
                busy = self._busy
            self._set_status(note=f"busy ({html.escape(busy or 'working')}): click ignored")
            return
        try:
            if (
                self._answer is not None
                and self.stale() is None
                and time.monotonic() - self._answered_at < self.debounce_s
            ):
                self._set_status(
                    note="already answered for this question and these settings: click ignored"
                )
                return
            self._note = ""  # a remark about an earlier click no longer applies
            with self._working("answering", steps=3) as step:
                question, made, started = self.question.value, self.settings(), time.monotonic()
                plain, steered, fired = compare_answers(
                    self.lm, self.steerer(), question, step=step
                )
                self._answers_made += 1
                self._answer = Answer(
                    question,
                    plain,
                    steered,
                    fired,
                    made,
                    self._answers_made,
                    time.monotonic() - started,
                )
                self._show_answer()
            self._answered_at = time.monotonic()
            self._set_status(
                f"ready: <b>{html.escape(self._name(self.concept or ''))}</b> · answer "
                f"{self._answer.number} took {self._answer.seconds:.1f} s",
                note="",
            )
        finally:
            queued = self._release()
        if queued and queued != self.concept:
            self.prepare(queued)

    def _ipython_display_(self):  # pragma: no cover - needs a front end
        from workbench.widgets.live import display_live

        display_live(
            self.widget,
            "the steering inspector",
            "its steering vectors are cached on disk, so running this cell brings it back "
            "without fitting them again",
        )


def _strip_tags(text: str) -> str:
    import re

    return re.sub(r"<[^>]+>", "", text)


def open_inspector(
    model="smollm2-135m-instruct",
    concept: str | None = None,
    question: str = "",
    bench: Benchmark | None = None,
    store=None,
    technique=None,
) -> SteeringInspector:
    """The notebook's start-up in one call: load the model (a name, or a loaded model) and the
    benchmark, prepare ``concept`` and type ``question``, with a status line saying what runs
    while it runs; it ends with how long each step took."""
    status = StartupStatus()
    took: list[str] = []
    started = time.monotonic()
    if isinstance(model, str):
        from workbench.backends import load_model

        status.show(f"loading the model {model} (the first time it is unpacked into the cache)")
        t = time.monotonic()
        lm = load_model(model)
        took.append(f"model {time.monotonic() - t:.1f} s")
    else:
        lm = model
    if bench is None:
        from workbench.taxonomy import load_benchmark

        status.show("loading the benchmark")
        t = time.monotonic()
        bench = load_benchmark()
        took.append(f"benchmark {time.monotonic() - t:.1f} s")
    t = time.monotonic()
    inspector = SteeringInspector(
        lm, bench, concept=concept, technique=technique, store=store, startup=status
    )
    if concept:
        took.append(f"{inspector._name(concept)} {time.monotonic() - t:.1f} s")
    if question:
        status.show("the first question's votes")
        inspector.question.value = question
    status.show(
        f"ready in {time.monotonic() - started:.1f} s ({', '.join(took)})"
        if took
        else f"ready in {time.monotonic() - started:.1f} s"
    )
    return inspector
