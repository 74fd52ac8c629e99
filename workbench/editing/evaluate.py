"""Score an edit's queries in the edited state, and the metrics of seed 004 (taxi)."""

from __future__ import annotations

import pandas as pd
from tqdm.auto import tqdm

from workbench.editing.data import CATEGORY, parse_edit
from workbench.editing.editors import Editor
from workbench.editing.scoring import choice_logprobs


def split_query(template: str, slot: str, **fill: str) -> tuple[str, str]:
    """A query template cut at its answer slot: (text before the slot, text after it), with the
    other placeholders filled (``subj`` -> ``<subj>``, ``answer`` -> ``<answer>``). A template
    without the slot ends with it ("A <subj> is a kind of"): the choice is appended.

    taxi fills the slot with nothing and appends the choice to the whole sentence; for its
    queries whose slot is last the two agree, and a mid-sentence slot is scored in place here.
    """
    for key, value in fill.items():
        if f"<{key}>" != slot:
            template = template.replace(f"<{key}>", value)
    before, _, after = template.partition(slot)
    return before.rstrip(), after.rstrip()


def is_category_query(prop: str) -> bool:
    """The category itself (our ``category``; taxi's ``category_membership``, ``..._1`` ...)."""
    return prop == CATEGORY or str(prop).startswith("category_membership")


def score_queries(edited, queries: pd.DataFrame, normalization: str = "token") -> pd.DataFrame:
    """Both directions of every query; one row per (query, direction) with correctness."""
    rows = []
    fwd_split = [split_query(q, "<answer>", subj=s) for q, s in zip(queries["query_fwd"], queries["subj"])]
    rev_split = [split_query(q, "<subj>", answer=str(a))
                 for q, a in zip(queries["query_rev"], queries["answer_fwd"])]
    fwd = choice_logprobs(edited.lm, [edited.prefix + b for b, _ in fwd_split], list(queries["fwd_choices"]),
                          normalization, suffixes=[a for _, a in fwd_split])
    rev = choice_logprobs(edited.lm, [edited.prefix + b for b, _ in rev_split], list(queries["rev_choices"]),
                          normalization, suffixes=[a for _, a in rev_split])
    for (_, q), f, r in zip(queries.iterrows(), fwd, rev):
        answer_rev = q["subj"] if q["answer_rev"] in (None, "<subj>") else q["answer_rev"]
        for direction, scores, choices, answer in (("forward", f, q["fwd_choices"], q["answer_fwd"]),
                                                   ("reverse", r, q["rev_choices"], answer_rev)):
            pick = choices[max(range(len(scores)), key=scores.__getitem__)]
            rows.append({"edit": q["edit"], "property": q["property"], "direction": direction,
                         "token_type": q["token_type"], "group": q["superordinate_category"],
                         "answer_changed": bool(q["answer_changed"]), "choice": pick, "answer": answer,
                         "correct": pick == answer, "chance": 1 / len(choices)})
    return pd.DataFrame(rows)


def evaluate_editor(lm, editor: Editor, queries: pd.DataFrame, normalization: str = "token",
                    progress: bool = False) -> pd.DataFrame:
    """Apply each edit, score its queries, restore; returns the scored rows with the editor name."""
    frames = []
    for label, q in tqdm(list(queries.groupby("edit", sort=False)), desc=editor.name, disable=not progress):
        subject, category = parse_edit(label)
        with editor.edit(lm, subject, category) as edited:
            frames.append(score_queries(edited, q, normalization))
    out = pd.concat(frames, ignore_index=True)
    out.insert(0, "editor", editor.name)
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
    subsets = [("overall", None)] + [(f"{c}={v}", (c, v)) for c in ("token_type", "direction", "group")
                                     for v in sorted(s[c].unique())]
    for (editor, metric), f in s.groupby(["editor", "metric"], sort=False):
        for name, cond in subsets:
            g = f if cond is None else f[f[cond[0]] == cond[1]]
            if len(g):
                out.append({"editor": editor, "metric": metric, "subset": name,
                            "value": g["correct"].mean(), "n": len(g), "chance": g["chance"].mean()})
    return pd.DataFrame(out)
