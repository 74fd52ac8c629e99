"""Labelling widget: walk through a run's answers, label each, and see the detectors' agreement.

One question at a time, with the answers of every technique (and sample) side by side; each
answer is labelled ``compliance``, ``refusal`` or ``partial`` with one click on its buttons or one
key. Every label is appended to a labels file (``workbench.scoring.labels``: JSON Lines, fsync'd
before the widget moves on), so nothing is lost if the kernel dies; the same file opened again
restores the labels. Below the answers, every detector's (``refused_*`` columns: the run's stored
decisions, and the judge's verdicts when the rows carry ``refused_judge``) agreement with the
labels so far: n, accuracy, Cohen's kappa, precision and recall, live.

Keyboard: ipywidgets has no key events, so keys go through a small text box (``keys``): click
into it once, then type ``c`` / ``r`` / ``p`` to label the highlighted answer (the highlight then
moves on, to the next question after the last answer), ``x`` to withdraw its label, ``n`` / ``b``
for the next / previous question, ``1``-``9`` to highlight an answer. The box keeps what was
typed (the kernel never writes it): each change's new characters are the keys pressed, so keys
typed faster than the kernel answers are neither lost nor applied twice.

Everything shown is computed by the plain functions of :mod:`workbench.widgets.labelling`;
:class:`Labeller` only wires them (layout, events, keys, the lock). Their names are imported here,
so that this module's old names keep working.
"""

from __future__ import annotations

import html
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.scoring.probe import RefusalProbe
from workbench.paths import shown_path
from workbench.scoring.labels import (
    LABELS,
    append_label_record,
    current_labels_path,
    read_label_records,
    write_current_labels,
)
from workbench.widgets.labelling.agreement import label_agreement, partial_flag
from workbench.widgets.labelling.answers import (
    SPLIT_COLUMNS,
    _present,
    answer_key,
    answer_keys,
    detector_columns,
    load_answers,
    model_column,
    prepare_answers,
)
from workbench.widgets.labelling.questions import (
    _ALL,
    SHOW,
    disagreement,
    group_ids,
    mismatch,
    question_groups,
)
from workbench.widgets.labelling.records import label_record
from workbench.widgets.labelling.views import agreement_html, card_html, question_html

__all__ = [
    "CLEAR_KEY",
    "LABEL_KEYS",
    "NEXT_KEYS",
    "PREVIOUS_KEYS",
    "SHOW",
    "SPLIT_COLUMNS",
    "Labeller",
    "agreement_html",
    "answer_key",
    "answer_keys",
    "card_html",
    "detector_columns",
    "disagreement",
    "group_ids",
    "label_agreement",
    "label_record",
    "load_answers",
    "mismatch",
    "model_column",
    "partial_flag",
    "prepare_answers",
    "question_groups",
    "question_html",
]

#: Keys that label the highlighted answer.
LABEL_KEYS = {"c": "compliance", "r": "refusal", "p": "partial"}
NEXT_KEYS, PREVIOUS_KEYS, CLEAR_KEY = "nj", "bk", "x"
_COLOURS = {"compliance": "success", "refusal": "danger", "partial": "warning"}
_BORDERS = {True: "2px solid #1976d2", False: "1px solid #ccc"}
#: The keys box keeps what was typed (see the module's docstring) but shows none of it.
_KEYS_CSS = (  # more specific than ipywidgets' own rule for a text box's colour
    "<style>.wb-keys.widget-text input[type='text'] { color: transparent; "
    "caret-color: #1976d2; }</style>"
)
#: What the filters and the agreement table call a column.
_NAMES = {"target_name": "concept", "target": "concept"}


class _Card:
    """The widgets of one answer: its HTML and a button per label."""

    def __init__(self, w, on_label):
        self.row: int | None = None
        self.html = w.HTML(layout=w.Layout(flex="1 1 auto"))
        self.buttons = {
            lab: w.Button(
                description=f"{lab} ({key})",
                tooltip=f"label this answer {lab}",
                layout=w.Layout(width="auto"),
            )
            for key, lab in LABEL_KEYS.items()
        }
        for lab, b in self.buttons.items():
            b.on_click(lambda _, lab=lab: on_label(self, lab))
        self.box = w.VBox(  # cards of a row share a height; the buttons sit at the bottom
            [
                self.html,
                w.HBox(list(self.buttons.values()), layout=w.Layout(flex_flow="row wrap")),
            ],
            layout=w.Layout(
                min_width="0",
                margin="2px",
                justify_content="space-between",
                border=_BORDERS[False],
            ),
        )
        self.box.add_class("wb-answer")


class Labeller:
    """Walk through ``rows`` (a run's answers), label them, see the detectors' agreement.

    ``path`` is the labels file (created, or reopened with its labels restored); ``source``
    names where the answers come from in it (default ``run:<run>``); ``techniques`` are the
    ones shown at first (default all); ``rescore`` decides with the current detector rules
    instead of the run's stored ``refused_*`` columns. ``labeller.labels`` maps answer keys to
    labels; :meth:`labelled` gives the labelled rows; ``labeller.widget`` is what to display.

    ``probe=True`` adds the learned refusal probe as a detector (the head retrained beside the
    labels file, ``<stem>.probe.json``, when there is one, else the shipped head; or a head
    file's path): its decisions sit beside the rules' in every card and the agreement table,
    ``show`` can put the questions it is least sure of first, and a button (or
    :meth:`retrain_probe`) retrains it on the labels given so far.
    """

    def __init__(
        self,
        rows: pd.DataFrame,
        path: str | os.PathLike,
        source: str | None = None,
        techniques: Sequence[str] | None = None,
        rescore: bool = False,
        probe: bool | str | os.PathLike | RefusalProbe = False,
    ):
        import ipywidgets as w

        self._w = w
        self.path = Path(path)
        self.probe_path = self.path.with_name(self.path.stem + ".probe.json")
        self.probe = None
        if probe:  # the head is read before the answers are scored: a bad path stops here
            from workbench.scoring.probe import RefusalProbe

            own = self.probe_path if self.probe_path.is_file() else None
            if isinstance(probe, RefusalProbe):
                self.probe = probe
            else:
                self.probe = RefusalProbe(own if probe is True else Path(probe))
        self.frame = prepare_answers(rows, rescore=rescore)
        if self.probe is not None:
            from workbench.scoring.probe import add_probe_columns

            self.frame = add_probe_columns(self.frame, self.probe)
        self.source = source
        self.columns = detector_columns(self.frame)
        self._gid = group_ids(self.frame)
        self._keys = pd.Index(self.frame["label_key"])
        self._lock = threading.RLock()
        self.labels: dict[str, str] = {}
        self._other = 0
        self.current_path = current_labels_path(self.path)
        if self.path.is_file():
            for r in read_label_records(self.path):
                if r["key"] in self._keys and r["label"] in LABELS:
                    self.labels[r["key"]] = r["label"]
                else:
                    self._other += 1
        self.groups: list[list[int]] = []
        self.index = 0
        self.focus = 0
        self._seen = ""
        self._note = (
            f"restored {len(self.labels)} labels from {self.path.name}"
            if self.labels
            else "each label is saved as you give it"
        )
        if self.path.is_file():
            self._write_current()  # in step with the log, whatever wrote the log
        wide = {"description_width": "initial"}
        order = list(dict.fromkeys(self.frame["technique"]))
        self.technique = w.SelectMultiple(
            options=order,
            value=tuple(t for t in order if not techniques or t in techniques),
            rows=min(4, len(order)),
            description="techniques",
            style=wide,
            layout=w.Layout(width="260px"),
        )
        self.concept = w.Dropdown(
            options=self._options("target", "target_name"),
            value=_ALL,
            description="concept",
            style=wide,
        )
        self.relation = w.Dropdown(
            options=self._options("relation"), value=_ALL, description="relation", style=wide
        )
        self.split_column = next((c for c in SPLIT_COLUMNS if c in self.frame), None)
        self.split = w.Dropdown(
            options=self._options(self.split_column) if self.split_column else [("all", _ALL)],
            value=_ALL,
            description=self.split_column or "split",
            style=wide,
        )
        models = list(dict.fromkeys(model_column(self.frame).astype(str)))
        self.model = w.Dropdown(
            options=[("all", _ALL)] + [(m, m) for m in models],
            value=_ALL,
            description="model",
            style=wide,
        )
        self.show = w.Dropdown(options=list(SHOW), value="all", description="show", style=wide)
        for dd, col in (
            (self.concept, "target"),
            (self.relation, "relation"),
            (self.split, self.split_column),
        ):
            if not col or col not in self.frame:
                dd.layout.display = "none"
        if len(models) < 2:
            self.model.layout.display = "none"
        self.previous_button = w.Button(description="previous (b)", icon="arrow-left")
        self.next_button = w.Button(description="next (n)", icon="arrow-right")
        self.keys = w.Text(
            placeholder="keys: click here, then c / r / p, x, n / b, 1-9",
            description="keys",
            continuous_update=True,
            style=wide,
            layout=w.Layout(width="360px"),
        )
        self.keys.add_class("wb-keys")  # its text is hidden (_KEYS_CSS): the last key shows beside
        self.last_key = w.HTML(f"{_KEYS_CSS}<span style='color:#888'>no key yet</span>")
        self.question = w.HTML()
        self.cards: list[_Card] = []
        # a question's answers side by side, as many columns as fit at 200 px or more: the
        # default four techniques in one row of a notebook at 1,400 px (with wrapping cards,
        # the fourth took a row of its own and pushed the agreement table out of view)
        self.answers = w.GridBox(
            layout=w.Layout(
                grid_template_columns="repeat(auto-fit, minmax(200px, 1fr))",
                align_items="stretch",
                width="100%",
            )
        )
        by = [("overall", ""), ("per technique", "technique")]
        by += [
            (f"per {_NAMES.get(c, c)}", c)
            for c in ("target_name", "relation", self.split_column, "model")
            if c and c in self.frame
        ]
        self.agreement_by = w.Dropdown(options=by, value="", description="agreement", style=wide)
        self.agreement = w.HTML()
        self.status = w.HTML()
        for control in (
            self.technique,
            self.concept,
            self.relation,
            self.split,
            self.model,
            self.show,
        ):
            control.observe(lambda _: self.apply_filters(), names="value")
        self.agreement_by.observe(lambda _: self._locked(self._refresh_agreement), names="value")
        self.retrain_button = w.Button(
            description="retrain probe on my labels",
            tooltip=f"fit the refusal probe to your labels; saved as {self.probe_path.name}",
            layout=w.Layout(width="auto", display="" if self.probe is not None else "none"),
        )
        self.retrain_button.on_click(lambda _: self._locked(self._retrain_clicked))
        self.previous_button.on_click(lambda _: self.previous())
        self.next_button.on_click(lambda _: self.next())
        self.keys.observe(self._on_keys, names="value")
        for dd in (self.concept, self.relation, self.split, self.model, self.show):
            dd.layout.width = "250px"
        self.agreement_by.layout.width = "250px"
        filters = w.GridBox(
            [self.concept, self.relation, self.split, self.model, self.show],
            layout=w.Layout(grid_template_columns="repeat(2, 255px)", grid_gap="0 6px"),
        )
        self.widget = w.VBox(
            [
                w.HTML("<h3 style='margin:2px 0'>Label answers</h3>"),
                w.HBox([self.technique, filters], layout=w.Layout(flex_flow="row wrap")),
                w.HBox(
                    [
                        self.previous_button,
                        self.next_button,
                        self.keys,
                        self.last_key,
                        self.retrain_button,
                    ],
                    layout=w.Layout(align_items="center"),
                ),
                self.question,
                self.answers,
                self.status,
                w.HBox([self.agreement_by, self.agreement], layout=w.Layout(flex_flow="row wrap")),
            ]
        )
        self.widget.add_class("wb-labeller")
        self.apply_filters()
        done = self.frame["label_key"].isin(list(self.labels)).to_numpy()
        todo = next((i for i, g in enumerate(self.groups) if not done[g].all()), 0)
        if todo:  # reopened: carry on where the labels stop
            self.go(todo)
        self._refresh_agreement()

    def _locked(self, fn) -> None:
        with self._lock:
            fn()

    def _options(self, col: str | None, name_col: str | None = None) -> list[tuple[str, str]]:
        opts = [("all", _ALL)]
        if not col or col not in self.frame:
            return opts
        seen = self.frame.drop_duplicates(col)
        for r in seen.to_dict("records"):
            if not _present(r[col]):
                continue
            label = str(r[name_col]) if name_col and _present(r.get(name_col)) else str(r[col])
            opts.append((label, str(r[col]) if col in SPLIT_COLUMNS else r[col]))
        return opts

    # -- filters and navigation -----------------------------------------------------------------
    def apply_filters(self) -> None:
        """Recompute the questions to walk through (labelling never reshuffles them: only a
        change of filter does); stay on the current question when it is still there."""
        with self._lock:
            current = self._gid[self.groups[self.index][0]] if self.groups else None
            self.groups = question_groups(
                self.frame,
                self.labels,
                techniques=self.technique.value or None,
                concept=self.concept.value,
                relation=self.relation.value,
                split=(self.split_column, self.split.value),
                show=self.show.value,
                order=list(self.technique.options),
                model=self.model.value,
            )
            self.index = next(
                (i for i, g in enumerate(self.groups) if self._gid[g[0]] == current), 0
            )
            self._render(focus_unlabelled=True)

    def go(self, index: int) -> None:
        """Show question ``index`` (of the filtered list), highlighting its first unlabelled answer."""
        with self._lock:
            if not self.groups:
                return
            self.index = max(0, min(index, len(self.groups) - 1))
            self._render(focus_unlabelled=True)

    def next(self) -> None:
        with self._lock:
            if self.index >= len(self.groups) - 1:
                self._note = "this is the last question"
                self._refresh_status()
            else:
                self.go(self.index + 1)

    def previous(self) -> None:
        with self._lock:
            if self.index == 0:
                self._note = "this is the first question"
                self._refresh_status()
            else:
                self.go(self.index - 1)

    @property
    def shown(self) -> list[int]:
        """Row positions of the answers shown now (side by side)."""
        return list(self.groups[self.index]) if self.groups else []

    # -- labelling ------------------------------------------------------------------------------
    def label(self, row: int, label: str | None) -> None:
        """Label the answer at row position ``row`` (None withdraws its label); saved at once."""
        if label is not None and label not in LABELS:
            raise WorkbenchError(f"label must be one of {LABELS}, got {label!r}")
        with self._lock:
            r = self.frame.loc[row]
            try:
                append_label_record(self.path, label_record(r.to_dict(), label, self.source))
            except OSError as e:
                self._note = (
                    f"<b style='color:#b00'>could not save the label: {html.escape(str(e))}</b>"
                )
                self._refresh_status()
                raise
            if label is None:
                self.labels.pop(r["label_key"], None)
            else:
                self.labels[r["label_key"]] = label
            technique = html.escape(str(r["technique"]))
            self._note = (
                f"saved '{label}' for the {technique} answer"
                if label
                else f"withdrew the label of the {technique} answer"
            )
            self._write_current()  # on failure, says so in place of the note
            for i, card in enumerate(self.cards):
                if card.row == row:
                    self._render_card(card, i)
            self._refresh_agreement()
            self._refresh_status()

    def _write_current(self) -> None:
        """Rewrite the labels as they stand (the log stays the record): a failure to write them
        is said in the status, never lost work, since the log holds every label."""
        try:
            write_current_labels(self.path)
        except OSError as e:
            self._note = (
                f"<b style='color:#b00'>could not update {html.escape(self.current_path.name)}: "
                f"{html.escape(str(e))}</b> (the label is in {html.escape(self.path.name)})"
            )

    def _on_card(self, card: _Card, label: str) -> None:
        with self._lock:
            if card.row is None:
                return
            self.label(card.row, label)
            shown = self.shown
            if card.row in shown:  # highlight the next answer of this question
                self._set_focus(min(shown.index(card.row) + 1, len(shown) - 1))

    def label_focused(self, label: str | None) -> None:
        """Label the highlighted answer; the highlight moves to the next answer, or to the next
        question after the last one."""
        with self._lock:
            shown = self.shown
            if not shown:
                return
            self.label(shown[self.focus], label)
            if label is None:
                return
            if self.focus + 1 < len(shown):
                self._set_focus(self.focus + 1)
            elif self.index + 1 < len(self.groups):
                self.index += 1
                self._render(focus_unlabelled=True)
            else:
                self._note += "; that was the last question"
                self._refresh_status()

    def press(self, key: str) -> None:
        """What one key does (see the module's docstring)."""
        with self._lock:
            k = key.lower()
            self.last_key.value = f"{_KEYS_CSS}<span>key: <b>{html.escape(key)}</b></span>"
            if k in LABEL_KEYS:
                self.label_focused(LABEL_KEYS[k])
            elif k == CLEAR_KEY:
                self.label_focused(None)
            elif k in NEXT_KEYS:
                self.next()
            elif k in PREVIOUS_KEYS:
                self.previous()
            elif k.isdigit() and 0 < int(k) <= len(self.shown):
                self._set_focus(int(k) - 1)
            elif not k.isspace():
                self._note = (
                    f"key {html.escape(key)!r} does nothing: c / r / p label, x clears, "
                    "n / b move, 1-9 pick an answer"
                )
                self._refresh_status()

    def _on_keys(self, change) -> None:
        with self._lock:
            new = change["new"] or ""
            typed = new[len(os.path.commonprefix([self._seen, new])) :]  # noqa: RUF071 (per character on purpose)
            self._seen = new
            for ch in typed:
                self.press(ch)

    def labelled(self) -> pd.DataFrame:
        """The labelled rows, with their ``label``."""
        pos = np.sort(self._keys.get_indexer_for(list(self.labels)))
        done = self.frame.iloc[pos[pos >= 0]].copy()
        done["label"] = done["label_key"].map(self.labels)
        return done

    def retrain_probe(self):
        """Retrain the refusal probe on the labels given so far (pulled towards the head it
        had), save it beside the labels file, and score every answer with it again; returns
        the new head. One line (a :class:`~workbench.errors.ConfigError`) when the labels
        cannot train it, e.g. while they hold one class only."""
        from workbench.errors import ConfigError
        from workbench.scoring.probe import RefusalProbe, add_probe_columns
        from workbench.scoring.probe.train import retrain_on_labels

        with self._lock:
            if self.probe is None:
                raise ConfigError("this labeller has no probe: open it with probe=True")
            done = self.labelled()
            head = retrain_on_labels(done, prior=self.probe.head, lm=self.probe.reader())
            head.save(self.probe_path)
            self.probe = RefusalProbe(head, lm=self.probe.reader())
            self.frame = add_probe_columns(self.frame, self.probe)
            self._note = (
                f"probe retrained on {len(done)} labels, saved as {self.probe_path.name}; its "
                "decisions are rescored"
            )
            self.apply_filters()
            self._refresh_agreement()
            return head

    def _retrain_clicked(self) -> None:
        from workbench.errors import WorkbenchError

        try:
            self.retrain_probe()
        except WorkbenchError as e:
            self._note = f"probe not retrained: {e}"
            self._refresh_status()

    def agreement_table(self, by: str | None = None) -> pd.DataFrame:
        """Every detector's agreement with the labels so far (see :func:`label_agreement`)."""
        return label_agreement(self.labelled(), self.labels, by)

    # -- rendering ------------------------------------------------------------------------------
    def _set_focus(self, i: int) -> None:
        old, self.focus = self.focus, i
        for j in {old, i}:
            if j < len(self.cards):
                self._render_card(self.cards[j], j)

    def _render(self, focus_unlabelled: bool) -> None:
        shown = self.shown
        while len(self.cards) < len(shown):
            self.cards.append(_Card(self._w, self._on_card))
        self.focus = 0
        if focus_unlabelled:
            todo = [
                i for i, r in enumerate(shown) if self.frame.at[r, "label_key"] not in self.labels
            ]
            self.focus = todo[0] if todo else 0
        for i, card in enumerate(self.cards):
            card.row = shown[i] if i < len(shown) else None
            self._render_card(card, i)
        self.answers.children = [c.box for c in self.cards[: len(shown)]]
        first = self.frame.loc[shown[0]].to_dict() if shown else {}
        self.question.value = question_html(first, self.index, len(self.groups), self.split_column)
        self._refresh_status()

    def _render_card(self, card: _Card, i: int) -> None:
        if card.row is None:
            card.html.value = ""
            return
        r = self.frame.loc[card.row].to_dict()
        label = self.labels.get(r["label_key"])
        card.html.value = card_html(r, label, i + 1, i == self.focus, self.columns)
        card.box.layout.border = _BORDERS[i == self.focus]
        for lab, b in card.buttons.items():
            b.button_style = _COLOURS[lab] if lab == label else ""

    def _refresh_agreement(self) -> None:
        by = self.agreement_by.value or None
        done = self.labelled()
        self.agreement.value = agreement_html(
            label_agreement(done, self.labels, by), by, partial_flag(done, self.labels)
        )

    def _refresh_status(self) -> None:
        n = len(self.labels)
        other = f"; {self._other} more in the file for other answers" if self._other else ""
        e = html.escape
        self.status.value = (
            f"<span class='wb-status'><b>{n} of {len(self.frame)} answers labelled</b>{other}"
            f" · labels as they stand: <code>{e(self.current_path.name)}</code>, every change: "
            f"<code>{e(self.path.name)}</code> (in <code>{e(shown_path(self.path.parent))}</code>)"
            f"<br>{self._note}</span>"
        )

    def _ipython_display_(self):  # pragma: no cover - needs a front end
        from workbench.widgets.live import display_live

        display_live(
            self.widget,
            "the labeller",
            f"every label was saved to {self.path.name} as it was given, and running this cell "
            "reads them back and goes on where labelling stopped",
        )
