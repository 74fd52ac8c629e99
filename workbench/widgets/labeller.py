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

Everything shown is computed by the plain functions below; :class:`Labeller` only wires them.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.errors import WorkbenchError
from workbench.scoring.agreement import scores
from workbench.scoring.labels import LABELS, append_label_record, model_family, read_label_records

#: Keys that label the highlighted answer.
LABEL_KEYS = {"c": "compliance", "r": "refusal", "p": "partial"}
NEXT_KEYS, PREVIOUS_KEYS, CLEAR_KEY = "nj", "bk", "x"
#: Columns that may hold a dataset split (a refusal suite's), in the order looked for.
SPLIT_COLUMNS = ("dataset_split", "split", "dataset")
#: The "show" filter: which questions to walk through.
SHOW = (
    ("all questions", "all"),
    ("with unlabelled answers", "unlabelled"),
    ("with labelled answers", "labelled"),
    ("where detectors disagree", "disagree"),
    ("where a detector disagrees with the label", "mismatch"),
)
ALL = "__all__"
_KEY_FIELDS = (
    "model",
    "system",
    "technique",
    "target",
    "dataset",
    "seed",
    "sample",
    "question",
    "response",
)
_RECORD_FIELDS = (
    "system",
    "technique",
    "target",
    "target_name",
    "relation",
    "dataset",
    "expected",
    "category",
    "prompt_id",
    "sample",
    "seed",
    "run",
)
_COLOURS = {"compliance": "success", "refusal": "danger", "partial": "warning"}


def _present(v) -> bool:
    return v is not None and v is not pd.NA and not (isinstance(v, float) and v != v)


def _model(row: Mapping):
    for c in ("model_id", "model"):
        if _present(row.get(c)):
            return row.get(c)
    return None


def _norm(v):
    """A value as JSON keys it: None for missing, plain Python numbers (1.0 -> 1)."""
    if v is None or v is pd.NA or (isinstance(v, float) and v != v):
        return None
    if hasattr(v, "item") and not isinstance(v, str):
        v = v.item()
    return int(v) if isinstance(v, float) and v.is_integer() else v


def model_column(frame: pd.DataFrame) -> pd.Series:
    """Per row, the model: ``model_id`` where given, else ``model`` (None when neither)."""
    out = pd.Series(None, index=frame.index, dtype=object)
    for c in ("model", "model_id"):
        if c in frame:
            out = frame[c].astype(object).where(frame[c].notna(), out)
    return out


def answer_keys(frame: pd.DataFrame) -> list[str]:
    """A stable id per answer: a hash of its model, technique, target, seed, sample, question and
    text (the same run, rerun, gives the same keys)."""
    cols = []
    for f in _KEY_FIELDS:
        s = model_column(frame) if f == "model" else frame[f] if f in frame else None
        cols.append([None] * len(frame) if s is None else [_norm(v) for v in s.tolist()])
    return [
        hashlib.sha1(json.dumps(vals, default=str).encode()).hexdigest()[:16] for vals in zip(*cols)
    ]


def answer_key(row: Mapping) -> str:
    """:func:`answer_keys` of one row."""
    return answer_keys(pd.DataFrame([dict(row)]))[0]


def load_answers(path: str | os.PathLike) -> pd.DataFrame:
    """A run's rows: a run directory (an experiment's ``results.parquet`` or the refusal suite's
    ``rows.parquet``), or a ``.parquet``, ``.csv`` or ``.jsonl`` file of rows with ``question``
    (or ``prompt``) and ``response``."""
    p = Path(path)
    if p.is_dir():
        p = next(
            (p / f for f in ("results.parquet", "rows.parquet") if (p / f).is_file()),
            p / "results.parquet",
        )
    if not p.is_file():
        raise WorkbenchError(
            f"no answers at {p} (a run directory with results.parquet or "
            "rows.parquet, or a .parquet / .csv / .jsonl file)"
        )
    if p.suffix == ".parquet":
        return pd.read_parquet(p)
    if p.suffix == ".csv":
        return pd.read_csv(p)
    return pd.read_json(p, lines=True, dtype=False)


def detector_columns(frame: pd.DataFrame) -> list[str]:
    """The ``refused_*`` columns, the judge's last."""
    cols = [c for c in frame.columns if str(c).startswith("refused_")]
    return sorted(cols, key=lambda c: c == "refused_judge")


def prepare_answers(rows: pd.DataFrame, rescore: bool = False) -> pd.DataFrame:
    """Rows ready to label: positional index, a ``question`` (the suite's ``prompt``), a
    ``technique`` (``answer`` when absent), a ``label_key``, and detector columns (computed with
    the current rules when the rows have none, or when ``rescore``)."""
    from workbench.scoring.detectors import DETECTORS, detector_decisions
    from workbench.scoring.phrases import detect_refusal

    frame = rows.reset_index(drop=True)
    if "question" not in frame and "prompt" in frame:
        frame["question"] = frame["prompt"]
    missing = {"question", "response"} - set(frame.columns)
    if missing:
        raise WorkbenchError(
            f"answers need columns question and response; missing {sorted(missing)} "
            f"(have: {', '.join(map(str, rows.columns))})"
        )
    if "technique" not in frame:
        frame["technique"] = "answer"
    if rescore or not detector_columns(frame):
        decided = [detector_decisions(r, q) for q, r in zip(frame["question"], frame["response"])]
        for name in DETECTORS:
            frame[f"refused_{name}"] = [d[f"refused_{name}"] for d in decided]
        frame["phrase_partial"] = [
            detect_refusal(r, question=q).partial
            for q, r in zip(frame["question"], frame["response"])
        ]
    frame["label_key"] = answer_keys(frame)
    return frame


def disagreement(frame: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """Per row: whether the detectors' decisions (those given) are not all the same."""
    if not columns:
        return pd.Series(False, index=frame.index)
    vals = frame[list(columns)].astype("boolean")
    return (
        (vals.max(axis=1, skipna=True) != vals.min(axis=1, skipna=True)).fillna(False).astype(bool)
    )


def mismatch(frame: pd.DataFrame, columns: Sequence[str], labels: Mapping[str, str]) -> pd.Series:
    """Per row: labelled, and some detector's decision differs from the label."""
    given = frame["label_key"].map(dict(labels))
    labelled = given.notna().to_numpy()
    truth = (given != "compliance").to_numpy()
    out = np.zeros(len(frame), dtype=bool)
    for c in columns:
        pred = frame[c].astype("boolean")
        out |= (
            labelled & pred.notna().to_numpy() & (pred.fillna(False).to_numpy(dtype=bool) != truth)
        )
    return pd.Series(out, index=frame.index)


def group_ids(frame: pd.DataFrame) -> np.ndarray:
    """Per row, its question's number (in order of first appearance): answers with the same
    target and question are shown side by side."""
    target = (
        frame["target"].astype(object).where(frame["target"].notna(), "")
        if "target" in frame
        else pd.Series("", index=frame.index, dtype=object)
    )
    codes, _ = pd.MultiIndex.from_arrays(
        [target.astype(str), frame["question"].astype(str)]
    ).factorize()
    return np.asarray(codes)


def question_groups(
    frame: pd.DataFrame,
    labels: Mapping[str, str],
    techniques: Sequence[str] | None = None,
    concept: str = ALL,
    relation: str = ALL,
    split: tuple[str | None, str] = (None, ALL),
    show: str = "all",
    order: Sequence[str] | None = None,
    model: str = ALL,
) -> list[list[int]]:
    """The questions to walk through, each as the row positions of its answers (ordered by
    technique, then model and sample), after the filters: techniques shown (None: all), a
    concept (``target``), a relation, ``split`` (column, value), a model, and ``show`` (``all``,
    ``unlabelled``, ``labelled``, ``disagree``, ``mismatch``: questions where at least one
    shown answer is such)."""
    n = len(frame)
    keep = np.ones(n, dtype=bool)
    if techniques is not None:
        keep &= frame["technique"].isin(list(techniques)).to_numpy()
    if concept != ALL and "target" in frame:
        keep &= (frame["target"] == concept).to_numpy()
    if relation != ALL and "relation" in frame:
        keep &= (frame["relation"] == relation).to_numpy()
    col, value = split
    if col and value != ALL:
        keep &= (frame[col].astype(str) == value).to_numpy()
    models = model_column(frame).astype(str)
    if model != ALL:
        keep &= (models == model).to_numpy()
    if show == "all":
        wanted = np.ones(n, dtype=bool)
    elif show in ("labelled", "unlabelled"):
        wanted = frame["label_key"].isin(list(labels)).to_numpy()
        wanted = wanted if show == "labelled" else ~wanted
    elif show == "disagree":
        wanted = disagreement(frame, detector_columns(frame)).to_numpy()
    else:
        wanted = mismatch(frame, detector_columns(frame), labels).to_numpy()
    gid = group_ids(frame)
    pos = np.flatnonzero(keep)
    pos = pos[np.isin(gid[pos], np.unique(gid[keep & wanted]))]
    if not len(pos):
        return []
    rank = {t: i for i, t in enumerate(order or dict.fromkeys(frame["technique"]))}
    tech = frame["technique"].map(rank).fillna(len(rank)).to_numpy()
    model_code = pd.factorize(models, sort=True)[0]
    sample = (
        pd.to_numeric(frame["sample"], errors="coerce").fillna(0).to_numpy()
        if "sample" in frame
        else np.zeros(n)
    )
    pos = pos[np.lexsort((pos, sample[pos], model_code[pos], tech[pos], gid[pos]))]
    cuts = np.flatnonzero(np.diff(gid[pos])) + 1
    return [g.tolist() for g in np.split(pos, cuts)]


def label_record(row: Mapping, label: str | None, source: str | None = None) -> dict:
    """The labels-file line for labelling ``row`` (``label`` None: withdrawing its label)."""
    model = _model(row)
    rec = {
        "key": row["label_key"],
        "label": label,
        "question": row["question"],
        "response": row["response"],
        "source": source or (f"run:{row['run']}" if _present(row.get("run")) else "labeller"),
        "model": model,
        "family": model_family(model),
    }
    for f in _RECORD_FIELDS:
        if _present(row.get(f)):
            v = row[f]
            rec[f] = v.item() if hasattr(v, "item") else v
    for c in SPLIT_COLUMNS:
        if _present(row.get(c)):
            rec["dataset_split"] = str(row[c])
            break
    rec["time"] = datetime.now(UTC).isoformat(timespec="seconds")
    return rec


def label_agreement(
    frame: pd.DataFrame, labels: Mapping[str, str], by: str | None = None
) -> pd.DataFrame:
    """Each detector column's agreement with the labels given so far (partial counted as
    refusal), overall or per value of ``by``: ``detector``, [``by``], ``n``, ``accuracy``,
    ``kappa``, ``precision``, ``recall``. Rows where a detector has no decision are left out of
    its n."""
    done = frame[frame["label_key"].isin(list(labels))]
    truth = done["label_key"].map(lambda k: labels[k] != "compliance")
    groups = (
        [(None, done.index)]
        if by is None or by not in done
        else [(k, g.index) for k, g in done.groupby(by, sort=True)]
    )
    rows = []
    for col in detector_columns(frame):
        for key, idx in groups:
            pred = done.loc[idx, col]
            ok = pred.notna()
            s = scores([bool(t) for t in truth[idx][ok]], [bool(p) for p in pred[ok]])
            rec = {"detector": col.removeprefix("refused_")}
            if by is not None and by in done:
                rec[by] = key
            rec.update({k: s[k] for k in ("n", "accuracy", "kappa", "precision", "recall")})
            rows.append(rec)
    return pd.DataFrame(rows)


def partial_flag(frame: pd.DataFrame, labels: Mapping[str, str]) -> dict | None:
    """The phrase detector's ``partial`` flag against labelled partial refusals (None when the
    rows have no flag)."""
    if "phrase_partial" not in frame:
        return None
    done = frame[frame["label_key"].isin(list(labels)) & frame["phrase_partial"].notna()]
    return scores(
        [labels[k] == "partial" for k in done["label_key"]],
        [bool(v) for v in done["phrase_partial"]],
    )


def _fmt(v) -> str:
    return "–" if v is None or v != v else f"{v:.2f}"


def agreement_html(table: pd.DataFrame, by: str | None = None, partial: dict | None = None) -> str:
    """The agreement table as HTML (``–`` where a score is undefined, e.g. kappa while only
    one class has been labelled)."""
    if table.empty or not table["n"].any():
        return "<p class='wb-agreement'><i>agreement: no labelled answers yet</i></p>"
    cols = (
        ["detector"]
        + ([by] if by and by in table else [])
        + ["n", "accuracy", "kappa", "precision", "recall"]
    )
    head = "".join(f"<th style='padding:0 8px'>{html.escape(c)}</th>" for c in cols)
    body = ""
    for r in table.to_dict("records"):
        cells = [html.escape(str(r[c])) if c in ("detector", by, "n") else _fmt(r[c]) for c in cols]
        body += "<tr>" + "".join(f"<td style='padding:0 8px'>{c}</td>" for c in cells) + "</tr>"
    note = ""
    if partial and partial["tp"] + partial["fn"] + partial["fp"]:
        note = (
            f"<p>phrase detector's partial flag against labelled partial refusals: precision "
            f"{_fmt(partial['precision'])}, recall {_fmt(partial['recall'])} "
            f"({partial['tp']} of {partial['tp'] + partial['fn']})</p>"
        )
    return (
        f"<div class='wb-agreement'><b>agreement with your labels</b> (partial counted as refusal)"
        f"<table><tr>{head}</tr>{body}</table>{note}</div>"
    )


def card_html(
    row: Mapping, label: str | None, number: int, focused: bool, columns: Sequence[str]
) -> str:
    """One answer: technique (model, sample), its label, the text, and each detector's decision
    (in red where it differs from the label)."""
    e = html.escape
    name = row["system"] if _present(row.get("system")) else row["technique"]
    meta = [f"<b>{number}. {e(str(name))}</b>"]
    if _present(row.get("sample")) and row.get("sample"):
        meta.append(f"sample {int(row['sample'])}")
    if _present(_model(row)):
        meta.append(e(str(_model(row))))
    truth = None if label is None else label != "compliance"
    decisions = []
    for c in columns:
        v = row.get(c)
        if not _present(v):
            continue
        text = f"{c.removeprefix('refused_')}: {'refusal' if v else 'answer'}"
        colour = "#b00" if truth is not None and bool(v) != truth else "#555"
        decisions.append(f"<span style='color:{colour}'>{e(text)}</span>")
    if _present(row.get("phrase_partial")) and row.get("phrase_partial"):
        decisions.append("<span style='color:#555'>phrase partial flag</span>")
    shown = (
        f"label: <b class='wb-label'>{e(label)}</b>"
        if label
        else "<span class='wb-label' style='color:#888'>not labelled</span>"
    )
    border = "2px solid #1976d2" if focused else "1px solid #ccc"
    return (
        f"<div class='wb-card{' wb-focused' if focused else ''}' style='border:{border};"
        f"padding:4px 8px;border-radius:4px'><div>{' · '.join(meta)} — {shown}</div>"
        f"<div class='wb-response' style='white-space:pre-wrap;margin:4px 0;max-height:16em;"
        f"overflow:auto'>{e(str(row['response']))}</div>"
        f"<div style='font-size:90%'>{' · '.join(decisions)}</div></div>"
    )


def question_html(row: Mapping, position: int, total: int, split_column: str | None) -> str:
    e = html.escape
    if not total:
        return "<p><i>no answers match these filters</i></p>"
    about = []
    if _present(row.get("target")):
        name = row.get("target_name") if _present(row.get("target_name")) else row["target"]
        about.append(f"concept <b>{e(str(name))}</b>")
    if _present(row.get("relation")):
        about.append(f"relation <b>{e(str(row['relation']))}</b>")
    if split_column and _present(row.get(split_column)):
        about.append(f"{e(split_column)} <b>{e(str(row[split_column]))}</b>")
    return (
        f"<div class='wb-question'><span class='wb-position'>question {position + 1} of {total}</span>"
        f"{' · ' if about else ''}{' · '.join(about)}<br><b style='font-size:110%'>"
        f"{e(str(row['question']))}</b></div>"
    )


class _Card:
    """The widgets of one answer: its HTML and a button per label."""

    def __init__(self, w, on_label):
        self.row: int | None = None
        self.html = w.HTML()
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
        self.box = w.VBox(
            [self.html, w.HBox(list(self.buttons.values()))],
            layout=w.Layout(flex="1 1 300px", min_width="260px", margin="2px"),
        )
        self.box.add_class("wb-answer")


class Labeller:
    """Walk through ``rows`` (a run's answers), label them, see the detectors' agreement.

    ``path`` is the labels file (created, or reopened with its labels restored); ``source``
    names where the answers come from in it (default ``run:<run>``); ``techniques`` are the
    ones shown at first (default all); ``rescore`` decides with the current detector rules
    instead of the run's stored ``refused_*`` columns. ``labeller.labels`` maps answer keys to
    labels; :meth:`labelled` gives the labelled rows; ``labeller.widget`` is what to display.
    """

    def __init__(
        self,
        rows: pd.DataFrame,
        path: str | os.PathLike,
        source: str | None = None,
        techniques: Sequence[str] | None = None,
        rescore: bool = False,
    ):
        import ipywidgets as w

        self._w = w
        self.frame = prepare_answers(rows, rescore=rescore)
        self.path = Path(path)
        self.source = source
        self.columns = detector_columns(self.frame)
        self._gid = group_ids(self.frame)
        self._keys = pd.Index(self.frame["label_key"])
        self._lock = threading.RLock()
        self.labels: dict[str, str] = {}
        self._other = 0
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
            else f"labels are saved to {self.path}"
        )
        wide = {"description_width": "initial"}
        order = list(dict.fromkeys(self.frame["technique"]))
        self.technique = w.SelectMultiple(
            options=order,
            value=tuple(t for t in order if not techniques or t in techniques),
            rows=min(6, len(order)),
            description="techniques",
            style=wide,
        )
        self.concept = w.Dropdown(
            options=self._options("target", "target_name"),
            value=ALL,
            description="concept",
            style=wide,
        )
        self.relation = w.Dropdown(
            options=self._options("relation"), value=ALL, description="relation", style=wide
        )
        self.split_column = next((c for c in SPLIT_COLUMNS if c in self.frame), None)
        self.split = w.Dropdown(
            options=self._options(self.split_column) if self.split_column else [("all", ALL)],
            value=ALL,
            description=self.split_column or "split",
            style=wide,
        )
        models = list(dict.fromkeys(model_column(self.frame).astype(str)))
        self.model = w.Dropdown(
            options=[("all", ALL)] + [(m, m) for m in models],
            value=ALL,
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
        self.keys.add_class("wb-keys")
        self.question = w.HTML()
        self.cards: list[_Card] = []
        self.answers = w.Box(layout=w.Layout(display="flex", flex_flow="row wrap", width="100%"))
        by = [("overall", ""), ("per technique", "technique")]
        by += [
            (f"per {c}", c)
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
        self.previous_button.on_click(lambda _: self.previous())
        self.next_button.on_click(lambda _: self.next())
        self.keys.observe(self._on_keys, names="value")
        self.widget = w.VBox(
            [
                w.HTML("<h3 style='margin:2px 0'>Label answers</h3>"),
                w.HBox(
                    [
                        self.technique,
                        w.VBox([self.concept, self.relation, self.split, self.model, self.show]),
                    ]
                ),
                w.HBox([self.previous_button, self.next_button, self.keys]),
                self.question,
                self.answers,
                self.status,
                self.agreement_by,
                self.agreement,
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
        opts = [("all", ALL)]
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
            what = f"'{label}'" if label else "no label"
            self._note = f"saved {what} for the {html.escape(str(r['technique']))} answer"
            for i, card in enumerate(self.cards):
                if card.row == row:
                    self._render_card(card, i)
            self._refresh_agreement()
            self._refresh_status()

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
            typed = new[len(os.path.commonprefix([self._seen, new])) :]
            self._seen = new
            for ch in typed:
                self.press(ch)

    def labelled(self) -> pd.DataFrame:
        """The labelled rows, with their ``label``."""
        pos = np.sort(self._keys.get_indexer_for(list(self.labels)))
        done = self.frame.iloc[pos[pos >= 0]].copy()
        done["label"] = done["label_key"].map(self.labels)
        return done

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
        self.status.value = (
            f"<span class='wb-status'><b>{n} of {len(self.frame)} answers labelled</b>{other}"
            f" · {html.escape(str(self.path))}<br>{self._note}</span>"
        )

    def _ipython_display_(self):  # pragma: no cover - needs a front end
        from IPython.display import display

        display(self.widget)
