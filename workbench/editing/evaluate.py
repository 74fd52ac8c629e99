"""Score an edit's queries in the edited state, and the metrics of seed 004 (taxi)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from workbench.editing.data import CATEGORY, parse_edit
from workbench.editing.editors import Editor
from workbench.editing.scoring import Normalization, choice_logprobs
from workbench.errors import WorkbenchError
from workbench.progress import tqdm

if TYPE_CHECKING:
    from workbench.generation.backend import Backend

SLOTS = ("in_place", "append")


def split_query(template: str, slot: str, slots: str = "in_place", **fill: str) -> tuple[str, str]:
    """A query template cut at its answer slot: (text before the slot, text after it), with the
    other placeholders filled (``subj`` -> ``<subj>``, ``answer`` -> ``<answer>``). A template
    without the slot ends with it ("A <subj> is a kind of"): the choice is appended.

    ``slots="in_place"``: a mid-sentence slot is scored in place (the choice, then the rest of
    the sentence). ``slots="append"`` is taxi's code (``custom.py`` ``evaluate``): every slot is
    emptied and the choice appended to the whole sentence. The two agree whenever the slot is
    last, as in every forward query of taxi's release.
    """
    for key, value in fill.items():
        if f"<{key}>" != slot:
            template = template.replace(f"<{key}>", value)
    if slots == "append":
        return template.replace(slot, "").rstrip(), ""
    if slots != "in_place":
        raise ValueError(f"slots must be one of {SLOTS}, got {slots!r}")
    before, _, after = template.partition(slot)
    return before.rstrip(), after.rstrip()


def is_category_query(prop: str) -> bool:
    """The category itself (our ``category``; taxi's ``category_membership``, ``..._1`` ...)."""
    return prop == CATEGORY or str(prop).startswith("category_membership")


def score_queries(
    edited,
    queries: pd.DataFrame,
    normalization: Normalization = "token",
    slots: str = "in_place",
) -> pd.DataFrame:
    """Both directions of every query; one row per (query, direction) with correctness. The
    subject is filled in as the ``subj`` column spells it (see :func:`edit_subject`)."""
    rows = []
    fwd_split = [
        split_query(q, "<answer>", slots, subj=s)
        for q, s in zip(queries["query_fwd"], queries["subj"])
    ]
    rev_split = [
        split_query(q, "<subj>", slots, answer=str(a))
        for q, a in zip(queries["query_rev"], queries["answer_fwd"])
    ]

    def scored(split: list[tuple[str, str]], choices: pd.Series):
        return choice_logprobs(
            edited.lm,
            [edited.prefix + b for b, _ in split],
            list(choices),
            normalization,
            suffixes=[a for _, a in split],
        )

    fwd = scored(fwd_split, queries["fwd_choices"])
    rev = scored(rev_split, queries["rev_choices"])
    for (_, q), f, r in zip(queries.iterrows(), fwd, rev):
        answer_rev = q["subj"] if q["answer_rev"] in (None, "<subj>") else q["answer_rev"]
        for direction, scores, choices, answer in (
            ("forward", f, q["fwd_choices"], q["answer_fwd"]),
            ("reverse", r, q["rev_choices"], answer_rev),
        ):
            pick = choices[max(range(len(scores)), key=scores.__getitem__)]
            rows.append(
                {
                    "edit": q["edit"],
                    "property": q["property"],
                    "direction": direction,
                    "token_type": q["token_type"],
                    "group": q["superordinate_category"],
                    "answer_changed": bool(q["answer_changed"]),
                    "choice": pick,
                    "answer": answer,
                    "correct": pick == answer,
                    "chance": 1 / len(choices),
                }
            )
    return pd.DataFrame(rows)


def edit_subject(label: str, queries: pd.DataFrame) -> str:
    """The subject an edit is made with: spelled as its queries' ``subj`` column spells it, so
    the edit and its queries always agree (taxi's release has a subject with a trailing space:
    both keep it as released, or both lose it after :func:`~workbench.editing.taxi.normalise_subjects`)."""
    subjects = queries["subj"].unique() if "subj" in queries else []
    if len(subjects) > 1:
        raise WorkbenchError(
            f"edit {label!r}: its queries name several subjects {sorted(map(repr, subjects))}"
        )
    return str(subjects[0]) if len(subjects) else parse_edit(label)[0]


def evaluate_editor(
    lm: Backend,
    editor: Editor,
    queries: pd.DataFrame,
    normalization: Normalization = "token",
    progress: bool = False,
    slots: str = "in_place",
) -> pd.DataFrame:
    """Apply each edit, score its queries, restore; returns the scored rows with the editor name."""
    frames = []
    for label, q in tqdm(
        list(queries.groupby("edit", sort=False)), desc=editor.name, disable=not progress
    ):
        category = parse_edit(label)[1]
        with editor.edit(lm, edit_subject(label, q), category) as edited:
            frames.append(score_queries(edited, q, normalization, slots))
    out = pd.concat(frames, ignore_index=True)
    out.insert(0, "editor", editor.name)
    if "release_load" in queries and len(queries):  # how taxi's release loaded (load_taxi)
        out["release_load"] = queries["release_load"].iloc[0]
    return out


def metric_of(row) -> str:
    if is_category_query(row["property"]):
        return "edit_success"
    return "consistency" if row["answer_changed"] else "invariance"


def edit_metrics(scored: pd.DataFrame) -> pd.DataFrame:
    """``editor, metric, subset, value, n``: edit success, property success (all property
    queries), consistency (properties that should change) and invariance (those that should
    not), overall and by token type, direction and superordinate group, plus chance."""
    s = scored.copy()
    s["metric"] = s.apply(metric_of, axis=1)
    prop = s[s["metric"] != "edit_success"].copy()
    prop["metric"] = "property_success"
    s = pd.concat([s, prop], ignore_index=True)
    out = []
    subsets = [("overall", None)] + [
        (f"{c}={v}", (c, v))
        for c in ("token_type", "direction", "group")
        for v in sorted(s[c].unique())
    ]
    for (editor, metric), f in s.groupby(["editor", "metric"], sort=False):
        for name, cond in subsets:
            g = f if cond is None else f[f[cond[0]] == cond[1]]
            if len(g):
                out.append(
                    {
                        "editor": editor,
                        "metric": metric,
                        "subset": name,
                        "value": g["correct"].mean(),
                        "n": len(g),
                        "chance": g["chance"].mean(),
                    }
                )
    return pd.DataFrame(out)
