"""The concept picker, driven through its widgets' values."""

import pytest

from workbench.taxonomy import load_benchmark
from workbench.widgets import ConceptPicker, concept_summary, search_options, summary_html

RIVER = "wn:09411430-n"


@pytest.fixture(scope="module")
def bench():
    return load_benchmark()


def test_search_options_list_roots_then_matches(bench):
    roots = search_options(bench, "")
    assert [cid for _, cid in roots][:5] == bench.atomic.roots
    hits = search_options(bench, "river")
    assert RIVER in [cid for _, cid in hits]
    assert any("[composition]" in label for label, _ in hits)


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
    p.picked.value = (RIVER,)
    p.remove_button.click()
    assert p.value == [sci]


def test_picker_rejects_unknown_initial_ids(bench):
    from workbench.taxonomy import UnknownConceptError

    with pytest.raises(UnknownConceptError):
        ConceptPicker(bench, initial=["wn:nope"])
