"""Integration: every editor moves the embedded model's forward category answer, then restores it."""

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


@pytest.fixture(scope="module")
def category_queries():
    data = load_categories()
    rng = random.Random(0)
    edits = [
        e
        for g in data["groups"]
        for e in rng.sample([e for e in edits_from_categories(data) if e.group == g], 3)
    ]
    q = build_edit_queries(data, edits)
    return q[q["property"] == "category"]


def forward_success(lm, editor, queries):
    s = evaluate_editor(lm, editor, queries)
    return s[s["direction"] == "forward"]["correct"].mean()


@pytest.fixture(scope="module")
def unedited(embedded, category_queries):
    return forward_success(embedded, get_editor("none"), category_queries)


@pytest.mark.parametrize("name", ["ike", "ft", "rome"])
def test_editor_changes_the_forward_category_answer_and_restores_weights(
    embedded, category_queries, unedited, name
):
    before = {k: v.clone() for k, v in embedded.model.state_dict().items()}
    base = unedited
    edited = forward_success(embedded, get_editor(name), category_queries)
    assert edited > 0.5 and edited >= base + 0.3, f"{name}: {edited:.2f} vs unedited {base:.2f}"
    assert all(torch.equal(v, before[k]) for k, v in embedded.model.state_dict().items())
