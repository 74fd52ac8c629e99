"""Integration: every editor moves the embedded model's forward category answer, then restores it."""

import functools
import random

import pytest
import torch

from workbench.editing import (
    build_edit_queries,
    edits_from_categories,
    evaluate_editor,
    get_editor,
    load_categories,
)

pytestmark = pytest.mark.integration

#: Edits drawn from the six groups, by editor: IKE (a prompt, seconds) three from each; FT and
#: ROME (weight updates, about 16 s an edit on 2 cores) one from each of three groups, the two
#: between them covering all six (each edit of either moved its answer when both ran on all six).
EDITS_PER_GROUP = {"ike": 3, "ft": 1, "rome": 1}
GROUPS = {
    "ike": None,
    "ft": ("animals", "foods", "plants"),
    "rome": ("drinks", "instruments", "vehicles"),
}


def editor_queries(name: str):
    """The category queries editor ``name`` is checked on (its groups' of the seeded sample)."""
    edits, q = category_queries(EDITS_PER_GROUP[name])
    if GROUPS[name] is None:
        return q
    return q[q["edit"].isin([e.label for e in edits if e.group in GROUPS[name]])]


@functools.cache
def category_queries(per_group: int):
    """(the edits, their category queries): ``per_group`` edits drawn from each group (seeded)."""
    data = load_categories()
    rng = random.Random(0)
    edits = [
        e
        for g in data["groups"]
        for e in rng.sample([e for e in edits_from_categories(data) if e.group == g], per_group)
    ]
    q = build_edit_queries(data, edits)
    return edits, q[q["property"] == "category"]


def forward_success(lm, editor, queries):
    s = evaluate_editor(lm, editor, queries)
    return s[s["direction"] == "forward"]["correct"].mean()


@pytest.mark.parametrize("name", ["ike", "ft", "rome"])
def test_editor_changes_the_forward_category_answer_and_restores_weights(embedded, name):
    queries = editor_queries(name)
    assert len(set(queries["edit"])) == EDITS_PER_GROUP[name] * len(GROUPS[name] or range(6))
    before = {k: v.clone() for k, v in embedded.model.state_dict().items()}
    base = forward_success(embedded, get_editor("none"), queries)
    edited = forward_success(embedded, get_editor(name), queries)
    assert edited > 0.5 and edited >= base + 0.3, f"{name}: {edited:.2f} vs unedited {base:.2f}"
    assert all(torch.equal(v, before[k]) for k, v in embedded.model.state_dict().items())
