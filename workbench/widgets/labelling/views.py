"""The HTML the labeller shows: the agreement table, one answer's card and the question."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import pandas as pd

from workbench.widgets.labelling.answers import _model, _present


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
    return (  # the border is the card's box (the labeller sets it), so buttons line up below
        f"<div class='wb-card{' wb-focused' if focused else ''}' style='padding:2px 6px'>"
        f"<div>{' · '.join(meta)} — {shown}</div>"
        f"<div class='wb-response' style='white-space:pre-wrap;margin:4px 0;max-height:10em;"
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
