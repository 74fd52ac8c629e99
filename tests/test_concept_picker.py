"""The concept picker, driven through its widgets' values."""

import pytest

from workbench.taxonomy import load_benchmark
from workbench.widgets import (
    NOTHING,
    ConceptPicker,
    browse_options,
    concept_summary,
    search_options,
    summary_html,
    targets_code,
)

RIVER = "wn:09411430-n"


@pytest.fixture(scope="module")
def bench():
    return load_benchmark()


def test_search_options_list_roots_then_matches(bench):
    roots = search_options(bench, "")
    assert roots.options[0] == (NOTHING, None)  # nothing is ever preselected
    assert [cid for _, cid in roots.options][1 : 1 + len(bench.atomic.roots)] == bench.atomic.roots
    hits = search_options(bench, "river")
    assert RIVER in [cid for _, cid in hits.options]
    assert any("[composition]" in label for label, _ in hits.options)
    assert "match" in hits.note


def test_search_says_when_nothing_matches_and_when_results_are_cut(bench):
    none = search_options(bench, "zzzqqq")
    assert none.options == [(NOTHING, None)] and "no concept matches 'zzzqqq'" in none.note
    many = search_options(bench, "e", limit=5)
    assert len(many.options) == 6 and "showing 5 of" in many.note


def test_browse_walks_down_and_up_the_tree(bench):
    tax = bench.atomic
    root = tax.roots[0]
    down = browse_options(bench, root)
    ids = [cid for _, cid in down.options]
    assert ids[1] == root and ids[2:] == tax.children(root)
    child = tax.children(root)[0]
    up = browse_options(bench, child)
    assert up.options[1] == (f"↑ {tax[root].name} (parent)", root)
    leaf = next(c.id for c in tax if not tax.children(c.id))
    assert "has no children" in browse_options(bench, leaf).note


def test_targets_code_is_a_parameters_line():
    assert (
        targets_code(["wn:1-n", "about/wn:2-n#wn:3-n"])
        == "targets = ['wn:1-n', 'about/wn:2-n#wn:3-n']"
    )


def test_summary_shows_the_neighbourhood(bench):
    s = concept_summary(bench, RIVER)
    assert s["ancestors"][:2] == ["stream", "body of water"]
    assert s["level"] == 3 and s["n_questions"] == 50
    assert s["siblings"] == [bench.atomic[x].name for x in bench.atomic.siblings(RIVER)]
    assert len(s["sample_questions"]) == 3
    html = summary_html(s)
    assert "body of water" in html and "sample questions" in html


def test_picker_search_select_pick_remove(bench):
    p = ConceptPicker(bench)
    p.search.value = "river"
    assert RIVER in [cid for _, cid in p.results.options]
    assert p.selected is None and p.details.value == ""  # typing selects nothing
    p.add_selected()
    assert p.value == []
    p.results.value = RIVER
    assert "stream" in p.details.value and "river" in p.details.value
    p.add_selected()
    p.add_selected()  # no duplicates
    assert p.value == [RIVER]
    p.search.value = "scientist"
    sci = next(cid for label, cid in p.results.options if label.strip().startswith("scientist"))
    p.results.value = sci
    p.add_button.click()
    assert p.value == [RIVER, sci]
    assert p.code.value == targets_code([RIVER, sci])
    p.picked.value = (RIVER,)
    p.remove_button.click()
    assert p.value == [sci] and p.code.value == targets_code([sci])


def test_picker_open_and_top_buttons_browse(bench):
    p = ConceptPicker(bench)
    root = bench.atomic.roots[0]
    p.results.value = root
    p.open_button.click()
    assert [cid for _, cid in p.results.options][2:] == bench.atomic.children(root)
    assert p.selected is None
    p.top_button.click()
    assert root in [cid for _, cid in p.results.options]


def test_picker_without_pick_controls(bench):
    def shown(widget):
        yield widget
        for child in getattr(widget, "children", ()):
            yield from shown(child)

    full, bare = list(shown(ConceptPicker(bench).widget)), ConceptPicker(bench, pick=False)
    assert any(x.__class__.__name__ == "SelectMultiple" for x in full)
    inside = list(shown(bare.widget))
    assert bare.add_button not in inside and bare.picked not in inside and bare.code not in inside


def test_picker_rejects_unknown_initial_ids(bench):
    from workbench.taxonomy import UnknownConceptError

    with pytest.raises(UnknownConceptError):
        ConceptPicker(bench, initial=["wn:nope"])
