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

#: Edits drawn from each of the six groups, by editor: IKE (a prompt, seconds) on three, FT and
#: ROME (weight updates, about 16 s an edit on 2 cores) on one, so each shows its effect on every
#: group's categories within two minutes.
EDITS_PER_GROUP = {"ike": 3, "ft": 1, "rome": 1}


@functools.cache
def category_queries(per_group: int):
    """The category queries of ``per_group`` edits drawn from each group (seeded)."""
    data = load_categories()
    rng = random.Random(0)
    edits = [
        e
        for g in data["groups"]
        for e in rng.sample([e for e in edits_from_categories(data) if e.group == g], per_group)
    ]
    q = build_edit_queries(data, edits)
    return q[q["property"] == "category"]


def forward_success(lm, editor, queries):
    s = evaluate_editor(lm, editor, queries)
    return s[s["direction"] == "forward"]["correct"].mean()


@pytest.mark.parametrize("name", ["ike", "ft", "rome"])
def test_editor_changes_the_forward_category_answer_and_restores_weights(embedded, name):
    queries = category_queries(EDITS_PER_GROUP[name])
    before = {k: v.clone() for k, v in embedded.model.state_dict().items()}
    base = forward_success(embedded, get_editor("none"), queries)
    edited = forward_success(embedded, get_editor(name), queries)
    assert edited > 0.5 and edited >= base + 0.3, f"{name}: {edited:.2f} vs unedited {base:.2f}"
    assert all(torch.equal(v, before[k]) for k, v in embedded.model.state_dict().items())
