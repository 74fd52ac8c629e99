"""Categorical edits and their queries (taxi-style), from our categories file or taxi's files.

An edit moves a subject to another category of its group ("Labrador -> cat"). Each edit has
multiple-choice queries, forward (predict the answer after a prompt about the subject) and
reverse (predict the subject after a prompt about the answer):

* the category itself ("A Labrador is a kind of" -> cat): edit success;
* each property of the new category ("The sound a Labrador makes is a" -> meow): the answer
  should change (consistency);
* properties shared by the whole group ("The number of legs a Labrador has is" -> four): the
  answer should stay (invariance).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.errors import WorkbenchError, some_of
from workbench.paths import repo_root
from workbench.releases import Found, check_release, register

CATEGORY = "category"
TAXI_COLUMNS = [
    "entity",
    "orig_entity",
    "token_type",
    "edit_type",
    "edit",
    "subj",
    "property",
    "query_fwd",
    "query_rev",
    "answer_changed",
    "fwd_choices",
    "rev_choices",
    "answer_fwd",
    "answer_rev",
    "orig_answer_fwd",
    "orig_answer_rev",
    "foil1",
    "foil2",
    "foil3",
    "superordinate_category",
]


@dataclass(frozen=True)
class Edit:
    subject: str
    old_category: str
    new_category: str
    group: str
    token_type: str  # "typical" | "rare"

    @property
    def label(self) -> str:
        return f"{self.subject} -> {self.new_category}"


def load_categories(path: str | os.PathLike | None = None) -> dict:
    p = Path(path) if path else repo_root() / "data" / "editing" / "categories.json"
    if not p.is_file():
        raise WorkbenchError(f"no categories file at {p}")
    data = json.loads(p.read_text())
    for gname, g in data.get("groups", {}).items():
        for cname, c in g["categories"].items():
            missing = set(g["properties"]) - set(c["properties"]) - set(g.get("shared", {}))
            if missing:
                raise WorkbenchError(
                    f"{p}: category {cname!r} of {gname!r} lacks properties {sorted(missing)}"
                )
    return data


def edits_from_categories(data: dict) -> list[Edit]:
    """Every subject assigned to every other category of its group."""
    out = []
    for gname, g in data["groups"].items():
        for cname, c in g["categories"].items():
            for kind, subjects in (("typical", c["typical"]), ("rare", c["atypical"])):
                for s in subjects:
                    for other in g["categories"]:
                        if other != cname:
                            out.append(Edit(s, cname, other, gname, kind))
    return out


def queries_for_edit(data: dict, edit: Edit) -> list[dict]:
    """Rows in taxi's column layout for one edit."""
    g = data["groups"][edit.group]
    cats = g["categories"]
    rows = []

    def foils_for(new_cat):
        return [cats[o]["typical"][0] for o in cats if o not in (new_cat, edit.old_category)]

    # the category query
    cat_choices = list(cats)
    rev_subjects = [edit.subject] + foils_for(edit.new_category)
    rows.append(
        _row(
            edit,
            CATEGORY,
            "A <subj> is a kind of",
            "One kind of <answer> is the",
            True,
            cat_choices,
            rev_subjects,
            edit.new_category,
            edit.old_category,
        )
    )
    for prop, tmpl in g["properties"].items():
        if prop in g.get("shared", {}):
            value = g["shared"][prop]
            choices = [value] + sorted(
                {
                    c["properties"][p]
                    for c in cats.values()
                    for p in c["properties"]
                    if c["properties"][p] != value
                }
            )[:2]
            rows.append(
                _row(
                    edit, prop, tmpl["fwd"], tmpl["rev"], False, choices, rev_subjects, value, value
                )
            )
        else:
            new, old = (
                cats[edit.new_category]["properties"][prop],
                cats[edit.old_category]["properties"][prop],
            )
            choices = [cats[c]["properties"][prop] for c in cats]
            rows.append(
                _row(
                    edit,
                    prop,
                    tmpl["fwd"],
                    tmpl["rev"],
                    new != old,
                    choices,
                    rev_subjects,
                    new,
                    old,
                )
            )
    return rows


def _row(edit, prop, fwd, rev, changed, fwd_choices, rev_choices, answer, orig_answer) -> dict:
    foils = [c for c in fwd_choices if c != answer] + [None, None, None]
    return {
        "entity": edit.subject,
        "orig_entity": edit.old_category,
        "token_type": edit.token_type,
        "edit_type": "category",
        "edit": edit.label,
        "subj": edit.subject,
        "property": prop,
        "query_fwd": fwd,
        "query_rev": rev,
        "answer_changed": changed,
        "fwd_choices": list(fwd_choices),
        "rev_choices": list(rev_choices),
        "answer_fwd": answer,
        "answer_rev": edit.subject,
        "orig_answer_fwd": orig_answer,
        "orig_answer_rev": edit.subject,
        "foil1": foils[0],
        "foil2": foils[1],
        "foil3": foils[2],
        "superordinate_category": edit.group,
    }


def build_edit_queries(data: dict | None = None, edits: list[Edit] | None = None) -> pd.DataFrame:
    data = data or load_categories()
    edits = edits if edits is not None else edits_from_categories(data)
    return pd.DataFrame([r for e in edits for r in queries_for_edit(data, e)], columns=TAXI_COLUMNS)


def load_taxi(path: str | os.PathLike, allow_partial: bool = False) -> pd.DataFrame:
    """taxi's ``datasets/edits-evaluation.json`` (pandas column-oriented JSON), unchanged, whole
    or an error naming what is missing (:func:`check_taxi_release`); with ``allow_partial``
    what is there, recorded in the ``release_load`` column."""
    p = Path(path)
    if not p.is_file():
        raise WorkbenchError(f"no taxi file at {p}")
    try:
        frame = pd.read_json(p, orient="columns")
    except ValueError as e:
        raise WorkbenchError(f"{p}: not column-oriented JSON ({e})") from None
    missing = [c for c in TAXI_COLUMNS if c not in frame.columns]
    if missing:
        raise WorkbenchError(f"{p}: missing columns {missing}")
    record = check_taxi_release(frame, p, allow_partial)
    return frame[TAXI_COLUMNS].reset_index(drop=True).assign(release_load=record)


# -- the release's manifest (workbench.releases) -------------------------------------------------
def taxi_file(path: str | os.PathLike) -> Path:
    """taxi's ``edits-evaluation.json``: ``path`` itself, or in ``path``, its ``datasets/``."""
    p = Path(path)
    for cand in (p, p / "edits-evaluation.json", p / "datasets" / "edits-evaluation.json"):
        if cand.is_file():
            return cand
    raise WorkbenchError(f"no taxi file at {p} (nor edits-evaluation.json in it or its datasets/)")


def _taxi_field_problem(row) -> str | None:
    """Why a row of taxi's file is malformed (None when it is not)."""
    for col in ("fwd_choices", "rev_choices"):
        v = row[col]
        if not isinstance(v, list) or not v or not all(isinstance(c, str) for c in v):
            return f"{col!r} must be a non-empty list of strings, got {type(v).__name__} {v!r:.60}"
    for col in (
        "edit",
        "subj",
        "property",
        "query_fwd",
        "query_rev",
        "answer_fwd",
        "superordinate_category",
    ):
        if not isinstance(row[col], str):
            return f"{col!r} must be a string, got {type(row[col]).__name__} {row[col]!r:.60}"
    if not isinstance(row["answer_changed"], (bool, np.bool_)):
        return f"'answer_changed' must be true or false, got {row['answer_changed']!r:.60}"
    if row["answer_fwd"] not in row["fwd_choices"]:
        return f"'answer_fwd' {row['answer_fwd']!r} is not one of 'fwd_choices'"
    return None


def count_taxi(path: str | os.PathLike, frame: pd.DataFrame | None = None) -> dict:
    """What taxi's file holds, for :mod:`workbench.releases`: its rows, with the edits and
    the rows per superordinate category as parts. A malformed row is an error naming the file
    and the row's key."""
    p = Path(path)
    if frame is None:
        try:
            frame = pd.read_json(p, orient="columns")
        except (ValueError, UnicodeDecodeError) as e:  # not JSON, or JSON of another shape
            raise WorkbenchError(
                f"{p} is not taxi's edits file (a JSON object of columns, as "
                f"datasets/edits-evaluation.json): {str(e).splitlines()[0][:120]}"
            ) from None
    missing = sorted(set(TAXI_COLUMNS) - set(frame.columns))
    if missing:
        raise WorkbenchError(
            f"{p} is not taxi's edits file: it has no column "
            + some_of([repr(c) for c in missing], 5)
        )
    for key, row in frame.iterrows():
        problem = _taxi_field_problem(row)
        if problem:
            raise WorkbenchError(f"{p}, row {key}: malformed query: {problem}")
    parts = {
        "edits": int(frame["edit"].nunique()),
        **{
            f"{g} queries": int(n)
            for g, n in frame["superordinate_category"].value_counts().items()
        },
    }
    return {p.name: Found(len(frame), parts)}


def _locate_taxi(root: str | os.PathLike) -> tuple[Path, dict[str, Found]]:
    path = taxi_file(root)
    return path.parent, count_taxi(path)


#: derekpowell/taxi datasets/edits-evaluation.json: 5,560 queries of 976 edits.
TAXI_RELEASE = register(
    "taxi",
    "github.com/derekpowell/taxi @ 6b7d41b, datasets/",
    {
        "edits-evaluation.json": {
            "items": 5560,
            "parts": {
                "edits": 976,
                "animal queries": 1912,
                "drink queries": 664,
                "food queries": 688,
                "instrument queries": 920,
                "plant queries": 656,
                "vehicle queries": 720,
            },
        },
    },
    unit="queries",
    locate=_locate_taxi,
)


def check_taxi_release(
    frame: pd.DataFrame, path: str | os.PathLike, allow_partial: bool = False
) -> str:
    """The load's record ("whole" / "partial: ...") of taxi's file against the published
    release (:data:`TAXI_RELEASE`) or the ``release_manifest.json`` beside it;
    anything less is an error naming what is missing unless ``allow_partial``."""
    p = Path(path)
    found = count_taxi(p, frame)
    if p.name != "edits-evaluation.json":  # a copy under another name: the release's file
        found = {"edits-evaluation.json": found[p.name]}
    return check_release("taxi", p.parent, found, allow_partial)


def parse_edit(label: str) -> tuple[str, str]:
    """'Siamese -> dog' -> ('Siamese', 'dog')."""
    if "->" not in label:
        raise WorkbenchError(f"edit {label!r} is not of the form 'subject -> category'")
    subj, cat = (x.strip() for x in label.split("->", 1))
    return subj, cat


def sample_edits(queries: pd.DataFrame, per_group: int, seed: int = 0) -> pd.DataFrame:
    """The queries of ``per_group`` edits drawn (seeded) from each superordinate category;
    ``per_group=0`` keeps every edit."""
    if per_group <= 0:
        return queries.reset_index(drop=True)
    import random

    rng = random.Random(seed)
    keep = []
    for _, g in queries.groupby("superordinate_category", sort=True):
        labels = sorted(g["edit"].unique())
        keep += rng.sample(labels, min(per_group, len(labels)))
    return queries[queries["edit"].isin(keep)].reset_index(drop=True)
