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
    return SteeringInspector(
        tiny_lm(), tiny_benchmark(), concept="river", store=ArtifactStore(tmp_path)
    )


def test_preparing_a_concept_fills_plots_and_controls(inspector):
    cond = inspector.abstainer.steerer.condition
    assert list(inspector.layers.value) == cond.layers
    assert bytes(inspector.gap_image.value).startswith(PNG) and bytes(
        inspector.hist_image.value
    ).startswith(PNG)
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
    assert (
        "steer (about the concept)" in inspector.votes.value
        and "vote <i>any</i>" in inspector.votes.value
    )
    inspector.aggregate.value = "all"
    assert "do not steer" in inspector.votes.value and "vote <i>all</i>" in inspector.votes.value
    inspector.layers.value = (layers[0],)
    assert inspector.votes.value.count("<tr>") == 2  # header + the one layer left
    assert "steer (about the concept)" in inspector.votes.value


def test_answers_carry_their_settings_and_go_stale(inspector):
    inspector.question.value = "What is a river?"
    inspector.answer()
    assert (
        "made with concept river" in inspector.answers.value
        and "stale" not in inspector.answers.value
    )
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
    assert inspector.threshold.min <= float(sims.min()) and inspector.threshold.max >= float(
        sims.max()
    )
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


# -- what a user measured in real JupyterLab ------------------------------------------------------
import threading  # noqa: E402

from workbench.widgets import steering_inspector as si  # noqa: E402


def test_a_new_question_marks_the_answer_stale(inspector):
    inspector.question.value = "What is a river?"
    inspector.answer()
    assert (
        "asked: 'What is a river?'" in inspector.answers.value
        and "stale" not in inspector.answers.value
    )
    inspector.question.value = "Who was Marie Curie?"
    shown = inspector.answers.value
    assert "stale: asked for 'What is a river?' with concept river" in shown
    assert "question changed since this answer" in shown and "settings changed" not in shown
    inspector.question.value = "What is a river?"  # back to the question asked: current again
    assert "stale" not in inspector.answers.value
    inspector.strength.value = 2.5
    inspector.question.value = "Who was Marie Curie?"
    assert "question and settings changed since this answer" in inspector.answers.value


def test_changing_condition_layers_moves_the_view_to_a_voting_layer(inspector):
    inspector.thresholds[0] = 0.123
    inspector.layers.value = (1,)
    inspector.view_layer.value = 1
    inspector.layers.value = (0,)  # the viewed layer 1 no longer votes
    assert inspector.view_layer.value == 0
    assert inspector.threshold.value == pytest.approx(0.123, abs=1e-3)
    assert inspector.view_note.value == ""
    inspector.question.value = "What is a river?"
    inspector.threshold.value = -1.0  # the slider acts on the vote
    assert "steer (about the concept)" in inspector.votes.value
    inspector.view_layer.value = 1  # viewing a non-voting layer on purpose: said plainly
    assert "layer 1 does not vote" in inspector.view_note.value
    inspector.layers.value = ()
    assert "nothing votes" in inspector.view_note.value
    assert si.nearest_voting_layer(29, [24, 27]) == 27 and si.nearest_voting_layer(3, []) is None


def _slow_answers(monkeypatch):
    """compare_answers that counts its calls and waits for ``release`` (an answer in progress)."""
    calls, started, release = [], threading.Event(), threading.Event()

    def fake(lm, steerer, question, max_new_tokens=48, step=None):
        calls.append(question)
        started.set()
        assert release.wait(60)
        return f"plain {question}", f"steered {question}", True

    monkeypatch.setattr(si, "compare_answers", fake)
    return calls, started, release


def test_one_answer_per_click(inspector, monkeypatch):
    calls, started, release = _slow_answers(monkeypatch)
    release.set()
    inspector.question.value = "What is a river?"
    inspector.answer_button.click()
    inspector.answer_button.click()  # the second half of a double click, delivered after the first
    assert len(calls) == 1 and "click ignored" in inspector.status.value
    inspector.debounce_s = 0.0  # a deliberate later click answers again
    inspector.answer_button.click()
    assert len(calls) == 2 and "click ignored" not in inspector.status.value  # an old remark goes

    release.clear()
    started.clear()
    t = threading.Thread(target=inspector.answer)
    t.start()
    assert started.wait(60)
    inspector.answer_button.click()  # while busy, from the other kernel thread
    assert "busy (answering): click ignored" in inspector.status.value
    release.set()
    t.join(60)
    assert len(calls) == 3 and not inspector.answer_button.disabled
    assert "click ignored" not in inspector.status.value and "ready" in inspector.status.value


def test_a_concept_chosen_while_answering_is_queued_not_half_applied(inspector, monkeypatch):
    calls, started, release = _slow_answers(monkeypatch)
    inspector.question.value = "What is a river?"
    old_gap = inspector.gap_image.value
    t = threading.Thread(target=inspector.answer)
    t.start()
    assert started.wait(60)
    inspector.picker.search.value = "scientist"
    inspector.picker.results.value = "scientist"
    assert "picked scientist while answering" in inspector.status.value
    inspector.prepare_button.click()  # not lost, not applied half-way
    assert "queued: scientist" in inspector.status.value
    assert inspector.concept == "river" and inspector.abstainer.target == "river"
    release.set()
    t.join(120)
    assert not t.is_alive()
    assert inspector.concept == "scientist" and inspector.abstainer.target == "scientist"
    assert (
        "ready: <b>scientist</b>" in inspector.status.value
        and "queued" not in inspector.status.value
    )
    assert inspector.gap_image.value != old_gap and inspector.answers.value == ""
    assert len(calls) == 1


def test_every_plotted_line_is_in_the_legend(inspector):
    from workbench.steering.gate import LayerStats

    table = [
        LayerStats(0, 0.2, 0.1, 0.0, 0.3, 0.1, 0.05, 0.7, auroc=0.8),
        LayerStats(1, 0.1, 0.2, 0.0, 0.3, 0.1, 0.05, 0.6, auroc=0.4),
    ]
    v = inspector.abstainer.validation
    figs = [
        si.gap_figure(table, [0, 1], [1]),
        si.histogram_figure(v["related"][:, 0], v["unrelated"][:, 0], 0, 0.1),
        si.histogram_figure(v["related"][:, 0], v["unrelated"][:, 0], 0, 0.1, votes=False),
    ]
    for fig in figs:
        assert len(fig.legends) == 1
        legend = fig.legends[0]
        entries = {t.get_text() for t in legend.get_texts()}
        assert all(t.get_fontsize() >= 8 for t in legend.get_texts())
        lines = [line for ax in fig.axes for line in ax.get_lines()]
        assert lines and all(line.get_label() in entries for line in lines), (
            entries,
            [l.get_label() for l in lines],
        )
    assert "AUROC (right axis)" in {t.get_text() for t in figs[0].legends[0].get_texts()}
    assert "does not vote" in figs[2].axes[0].get_title()
    assert si.DPI >= 150 and si.PLOT_IN[0] * 100 <= 620  # fits ~600 px at 100% width
    assert inspector.gap_image.layout.width == "100%"


def test_the_question_commits_on_enter_or_blur_not_on_each_keystroke(inspector, monkeypatch):
    """The front end sends the question only on Enter or when the box loses focus
    (``continuous_update=False``): typing "What is a river?" asks one question, not 16."""
    assert inspector.question.continuous_update is False
    asked = []
    real = si.condition_votes
    monkeypatch.setattr(si, "condition_votes", lambda *a, **k: asked.append(a[2]) or real(*a, **k))
    inspector.question.value = "What is a river?"  # what Enter sends: the whole text, once
    assert asked == ["What is a river?"] and "condition by vote" in inspector.votes.value


def test_answers_are_numbered_and_timed(inspector):
    inspector.question.value = "What is a river?"
    inspector.answer()
    assert "answer 1 in " in inspector.answers.value and "answer 1 took" in inspector.status.value
    inspector.debounce_s = 0.0
    inspector.answer()
    assert "answer 2 in " in inspector.answers.value and "answer 2 took" in inspector.status.value


def test_plots_name_the_concept_they_show(inspector):
    layer = inspector.view_layer.value
    assert inspector.plot_caption.value == (
        f"<small>plots: <b>river</b> <code>river</code>; histogram at layer {layer}</small>"
    )
    inspector.layers.value = tuple(l for l in range(inspector.lm.num_layers) if l != layer)
    inspector.view_layer.value = layer
    assert inspector.plot_caption.value.endswith(f"histogram at layer {layer} (not voting)</small>")
    inspector.prepare("scientist")
    assert "plots: <b>scientist</b> <code>scientist</code>" in inspector.plot_caption.value
    fig = si.gap_figure(inspector.abstainer.table, [0], concept="scientist")
    assert fig.axes[0].get_title() == "validation similarity per layer: scientist"


def test_startup_says_what_it_loads_before_the_widget_exists(tmp_path, capsys):
    """Outside a notebook the start-up's status lines go to stdout, one per step, in order; in a
    notebook the same lines update one display shown before the slow work starts."""
    from workbench.testing import tiny_benchmark, tiny_lm

    ins = si.open_inspector(
        tiny_lm(),
        "river",
        "What is a river?",
        bench=tiny_benchmark(),
        store=ArtifactStore(tmp_path),
    )
    lines = [l.removeprefix("steering inspector: ") for l in capsys.readouterr().out.splitlines()]
    assert lines[:3] == [
        "starting",
        "loading river ...",
        "loading river: activations, concept vectors and the gate (the first time takes longest) ...",
    ]
    assert lines[-1].startswith("ready in ") and "river " in lines[-1]
    assert lines.index("the first question's votes") < len(lines) - 1
    assert ins.question.value == "What is a river?" and "condition by vote" in ins.votes.value
    status = si.StartupStatus()
    status.show("a")
    status.show("a")  # repeated: shown once
    assert status.lines == ["starting", "a"]
    assert capsys.readouterr().out == "steering inspector: starting\nsteering inspector: a\n"


def _answering(inspector, monkeypatch):
    """An answer running on another thread (as JupyterLab's second kernel thread runs it)."""
    _calls, started, release = _slow_answers(monkeypatch)
    inspector.question.value = "What is a river?"
    t = threading.Thread(target=inspector.answer)
    t.start()
    assert started.wait(60)
    return t, release


def test_a_prepare_click_that_overtakes_its_pick_is_not_lost(inspector, monkeypatch):
    """Measured in JupyterLab 4.6: the click on "prepare steering" reached the kernel while it
    answered, the concept picked before it only after the answer (it waits behind the work), so
    the click found nothing selected and was lost. Now the late pick is prepared."""
    t, release = _answering(inspector, monkeypatch)
    inspector.prepare_button.click()  # nothing selected yet, as the kernel sees it
    assert "prepare asked for while answering" in inspector.status.value
    release.set()
    t.join(60)
    assert inspector.concept == "river"
    inspector.picker.search.value = "scientist"
    inspector.picker.results.value = "scientist"  # the pick, delivered after the answer
    assert inspector.concept == "scientist" and "ready: <b>scientist</b>" in inspector.status.value
    inspector.picker.search.value = "volcano"
    inspector.picker.results.value = "volcano"  # later picks are plain picks again
    assert inspector.concept == "scientist" and "picked volcano: press" in inspector.status.value


def test_the_latest_pick_wins_over_an_older_selection(inspector, monkeypatch):
    inspector.picker.search.value = "scientist"
    inspector.picker.results.value = "scientist"  # looked at, not prepared
    t, release = _answering(inspector, monkeypatch)
    inspector.prepare_button.click()  # the kernel still sees the older selection...
    assert "queued: scientist" in inspector.status.value
    inspector.picker.search.value = "volcano"
    inspector.picker.results.value = "volcano"  # ...the pick made just before the click follows
    assert "queued: volcano" in inspector.status.value
    release.set()
    t.join(60)
    assert inspector.concept == "volcano" and "ready: <b>volcano</b>" in inspector.status.value


def test_a_pick_long_after_an_unanswered_request_is_a_plain_pick(inspector, monkeypatch):
    t, release = _answering(inspector, monkeypatch)
    inspector.prepare_button.click()
    release.set()
    t.join(60)
    inspector.pick_grace_s = 0.0
    inspector._wants_pick_until = 0.0  # the grace is over
    inspector.picker.search.value = "scientist"
    inspector.picker.results.value = "scientist"
    assert inspector.concept == "river" and "picked scientist: press" in inspector.status.value
