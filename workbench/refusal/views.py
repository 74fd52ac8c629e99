"""The refusal suite's tables as a notebook shows them: narrow enough for a notebook column.

The frames a run returns (``SuiteResult.misbehaviour``, ``.table``) keep every column, with
their plain names, for code and CSV. What a person reads in a notebook is these views: a system
on two lines (model, then the abstainer it was made into), a split that may break at ``/``, the
three shares side by side, and one verdict column; the same numbers, within the notebook
column (measured at a 1,400 px window: 948 of 968 px, where the full frame was reported at
1,354 px).
"""

from __future__ import annotations

import html

import pandas as pd

#: Short words for the behaviour expected of a split.
EXPECTED_WORDS = {
    "should_refuse": "refuse",
    "may_refuse": "may refuse",
    "should_not_refuse": "answer",
}

_STYLES = [
    {"selector": "", "props": "font-size: 12px; border-collapse: collapse;"},
    {"selector": "th", "props": "text-align: left; padding: 2px 8px; vertical-align: bottom;"},
    {"selector": "td", "props": "padding: 2px 8px; vertical-align: top; text-align: left;"},
    {"selector": "td.col_num", "props": "text-align: right; white-space: nowrap;"},
]


def system_html(system: str) -> str:
    """``model+technique@target`` on two lines (the abstainer under its model); a plain model on
    one. Long ids may break after ``/``, ``:`` and ``@``."""
    model, _, abstainer = str(system).partition("+")
    out = _breakable(model)
    if abstainer:
        out += f"<br><span style='color:#555'>+ {_breakable(abstainer)}</span>"
    return out


def _breakable(text: str) -> str:
    e = html.escape(text)
    for ch in ("/", ":", "@"):
        e = e.replace(ch, f"{ch}<wbr>")
    return e


def misbehaviour_view(frame: pd.DataFrame):
    """``SuiteResult.misbehaviour`` for reading: system, split, what is expected, prompts, the
    compliance / ambiguous / rejection %, the rejection the split should have, and the verdict
    (the failure, in red, when it misbehaves; ``ok`` otherwise). A pandas Styler (HTML in a
    notebook); ``.data`` is the frame shown."""
    if frame.empty:
        return frame
    shown = pd.DataFrame(
        {
            "system": [system_html(s) for s in frame["system"]],
            "split": [_breakable(str(s)) for s in frame["split"]],
            "expected": [EXPECTED_WORDS.get(e, e) for e in frame["expected"]],
            "prompts": frame["prompts"].astype(int),
            "compliance %": frame["compliance_pct"],
            "ambiguous %": frame["ambiguous_pct"],
            "rejection %": frame["rejection_pct"],
            "should be": [_threshold(t) for t in frame["threshold"]],
            "verdict": [
                f"<b style='color:#b00'>{html.escape(f)}</b>" if bad else "ok"
                for f, bad in zip(frame["failure"], frame["misbehaves"])
            ],
        }
    )
    return _styled(shown, ["prompts", "compliance %", "ambiguous %", "rejection %"])


def _styled(shown: pd.DataFrame, numbers: list[str]):
    """``shown`` as a compact left-aligned Styler; ``numbers`` right-aligned, and those that are
    floats at one decimal."""
    decimals = [c for c in numbers if pd.api.types.is_float_dtype(shown[c])]
    return (
        shown.style.format("{:.1f}", subset=decimals)
        .hide(axis="index")
        .set_table_styles(_STYLES)
        .set_td_classes(pd.DataFrame(dict.fromkeys(numbers, "col_num"), index=shown.index))
    )


def _threshold(text: str) -> str:
    """``rejection >= 80%`` -> ``≥ 80% rejected``; ``(any)`` -> ``any``."""
    t = str(text)
    if t.startswith("rejection"):
        op, value = t.removeprefix("rejection").split()
        return f"{'≥' if op == '>=' else '≤'} {value} rejected"
    return t.strip("()")


def rates_view(table: pd.DataFrame):
    """``SuiteResult.table`` as rejection % of prompts per system and split (rows) by source
    (columns): every detector beside the judge, a source that disagrees stands out."""
    if table.empty:
        return table
    wide = table.pivot_table(
        index=["system", "split"], columns="source", values="rejection_pct", sort=False
    ).reset_index()
    wide.columns.name = None
    sources = [c for c in wide.columns if c not in ("system", "split")]
    wide["system"] = [system_html(s) for s in wide["system"]]
    wide["split"] = [_breakable(str(s)) for s in wide["split"]]
    return _styled(wide, sources)
