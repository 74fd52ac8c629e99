"""The steering inspector, driven through its widgets on a tiny model."""

import pytest

from workbench.techniques import ArtifactStore
from workbench.testing import tiny_benchmark, tiny_lm
from workbench.widgets import SteeringInspector
from workbench.widgets.steering_inspector import LayerVote, gap_figure, votes_html

PNG = b"\x89PNG"


@pytest.fixture
def inspector(tmp_path):
    return SteeringInspector(tiny_lm(), tiny_benchmark(), concept="river",
                             store=ArtifactStore(tmp_path))


def test_preparing_a_concept_fills_plots_and_controls(inspector):
    cond = inspector.abstainer.steerer.condition
    assert list(inspector.layers.value) == cond.layers
    assert bytes(inspector.gap_image.value).startswith(PNG) and bytes(inspector.hist_image.value).startswith(PNG)
    assert inspector.threshold.value == pytest.approx(cond.thresholds[0], abs=1e-3)
    assert "river" in inspector.status.value


def test_moving_the_threshold_changes_the_vote(inspector):
    inspector.layers.value = (inspector.view_layer.value,)
    inspector.question.value = "What is a river?"
    inspector.threshold.value = -1.0
    assert "fires" in inspector.votes.value and "steer (about the concept)" in inspector.votes.value
    inspector.threshold.value = 1.0
    assert "do not steer" in inspector.votes.value
    old = inspector.hist_image.value
    inspector.threshold.value = 0.5
    assert inspector.hist_image.value != old  # the threshold line moved


def test_answer_shows_unsteered_and_steered_side_by_side(inspector):
    inspector.layers.value = (inspector.view_layer.value,)
    inspector.question.value = "What is a river?"
    inspector.threshold.value = -1.0
    inspector.strength.value = 3.0
    inspector.answer_button.click()
    assert "unsteered" in inspector.answers.value and "did not fire" not in inspector.answers.value
    inspector.threshold.value = 1.0
    inspector.answer()
    assert "condition did not fire" in inspector.answers.value


def test_prepare_button_uses_the_picked_concept(tmp_path):
    ins = SteeringInspector(tiny_lm(), tiny_benchmark(), store=ArtifactStore(tmp_path))
    assert ins.abstainer is None
    ins.prepare(None)
    assert "pick a concept" in ins.status.value
    ins.picker.search.value = "scientist"
    ins.picker.results.value = "scientist"
    ins.prepare_button.click()
    assert ins.abstainer.target == "scientist"


def test_pure_helpers():
    html = votes_html([LayerVote(3, 0.4, 0.2), LayerVote(5, 0.1, 0.2)], decision=False)
    assert "fires" in html and "do not steer" in html
    from workbench.steering.gate import LayerStats

    fig = gap_figure([LayerStats(0, 0.2, 0.1, 0.0, 0.3, 0.1, 0.05, 0.7)], [0])
    assert fig.axes[0].get_xlabel() == "layer"
