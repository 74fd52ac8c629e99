"""The steering inspector, driven through its widgets on a tiny model."""

import pytest
import torch

from workbench.techniques import ArtifactStore
from workbench.testing import tiny_benchmark, tiny_lm
from workbench.widgets import SteeringInspector
from workbench.widgets.steering_inspector import (
    LayerVote,
    gap_figure,
    slider_range,
    votes_html,
)

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
    assert "select a concept" in ins.status.value
    ins.picker.search.value = "scientist"
    ins.prepare_button.click()
    assert ins.abstainer is None  # typing alone selects nothing
    ins.picker.results.value = "scientist"
    ins.prepare_button.click()
    assert ins.abstainer.target == "scientist"


def test_every_control_refreshes_the_votes(inspector):
    inspector.question.value = "What is a river?"
    inspector.layers.value = (0, 1)
    layers = [0, 1]
    for layer in layers:  # make the layers disagree, so the vote rule matters
        inspector.thresholds[layer] = 1.0
    inspector.thresholds[layers[0]] = -1.0
    inspector.aggregate.value = "any"
    assert "steer (about the concept)" in inspector.votes.value and "vote <i>any</i>" in inspector.votes.value
    inspector.aggregate.value = "all"
    assert "do not steer" in inspector.votes.value and "vote <i>all</i>" in inspector.votes.value
    inspector.layers.value = (layers[0],)
    assert inspector.votes.value.count("<tr>") == 2  # header + the one layer left
    assert "steer (about the concept)" in inspector.votes.value


def test_answers_carry_their_settings_and_go_stale(inspector):
    inspector.question.value = "What is a river?"
    inspector.answer()
    assert "made with concept river" in inspector.answers.value and "stale" not in inspector.answers.value
    assert "settings changed" not in inspector.answers.value
    inspector.strength.value = 2.5
    assert "settings changed since this answer" in inspector.answers.value
    assert f"strength {inspector.settings().strength:.2f}" not in inspector.answers.value
    inspector.prepare("scientist")
    assert inspector.answers.value == ""  # no answer from the previous concept survives


def test_changing_the_threshold_while_answering_is_safe(inspector):
    """Two kernel threads, as JupyterLab 4 with ipykernel 7 delivers widget events: the answer
    arrives intact and the vote shown is for the final threshold."""
    import threading

    inspector.question.value = "What is a river?"
    errors = []

    def answer():
        try:
            inspector.answer()
        except Exception as e:  # pragma: no cover - what the test guards against
            errors.append(e)

    t = threading.Thread(target=answer)
    t.start()
    for value in (-1.0, 0.9, -0.5, 1.0):
        inspector.threshold.value = value
    t.join(timeout=120)
    assert not t.is_alive() and not errors
    assert "unsteered" in inspector.answers.value
    assert "do not steer" in inspector.votes.value  # 1.0 at the viewed layer blocks "all"
    assert not inspector.answer_button.disabled


def test_threshold_slider_fits_the_viewed_layer(inspector):
    v, layer = inspector.abstainer.validation, inspector.view_layer.value
    sims = torch.cat([v["related"][:, layer], v["unrelated"][:, layer]])
    assert inspector.threshold.min <= float(sims.min()) and inspector.threshold.max >= float(sims.max())
    assert inspector.threshold.max - inspector.threshold.min < 2.0
    assert inspector.threshold.value == pytest.approx(inspector.thresholds[layer], abs=1e-3)
    assert slider_range(torch.tensor([0.1]), torch.tensor([0.2]), 0.9) == (0.05, 0.95)
    assert slider_range(torch.tensor([-0.99]), torch.tensor([0.99]), 0.0) == (-1.0, 1.0)


def test_pure_helpers():
    html = votes_html([LayerVote(3, 0.4, 0.2), LayerVote(5, 0.1, 0.2)], decision=False)
    assert "fires" in html and "do not steer" in html
    from workbench.steering.gate import LayerStats

    fig = gap_figure([LayerStats(0, 0.2, 0.1, 0.0, 0.3, 0.1, 0.05, 0.7)], [0])
    assert fig.axes[0].get_xlabel() == "layer"
