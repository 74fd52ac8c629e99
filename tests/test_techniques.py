"""The technique interface on tiny models: registry, data hygiene, artifacts, each technique."""

import pytest
import torch

from workbench.errors import ConfigError
from workbench.generation import GenerationConfig, generate
from workbench.taxonomy import UnknownConceptError
from workbench.techniques import (
    SELECT_TECHNIQUES,
    TECHNIQUES,
    Abstainer,
    ArtifactMismatchError,
    ArtifactStore,
    Params,
    Technique,
    get_technique,
    register,
    target_data,
)
from workbench.testing import tiny_benchmark, tiny_lm

Q = ["What is a river?", "Who was the first physicist?"]
CFG = GenerationConfig(max_new_tokens=4)
FAST_SFT = {"epochs": 1, "batch_size": 8, "answer_tokens": 8}


@pytest.fixture(scope="module")
def bench():
    return tiny_benchmark()


@pytest.fixture
def store(tmp_path):
    return ArtifactStore(tmp_path / "artifacts")


def test_registry_lists_the_five_select_techniques_with_their_nature():
    assert set(SELECT_TECHNIQUES) <= set(TECHNIQUES)
    info = {n: (TECHNIQUES[n].nature, TECHNIQUES[n].access) for n in SELECT_TECHNIQUES}
    assert info["zero_shot"] == ("inference-time", "black-box")
    assert info["steering"] == ("inference-time", "white-box")
    assert info["sft_dpo"] == ("fine-tuning", "white-box")


def test_unknown_technique_and_parameter_are_named():
    with pytest.raises(ConfigError, match="unknown technique 'lobotomy'.*steering"):
        get_technique("lobotomy")
    with pytest.raises(ConfigError, match="technique 'steering' has no parameter 'strenght'"):
        get_technique("steering", strenght=2.0)
    with pytest.raises(ConfigError, match="aggregate must be"):
        get_technique("steering", aggregate="most")


def test_unknown_target_fails_before_any_work(bench, store):
    with pytest.raises(UnknownConceptError, match="'rivers'"):
        get_technique("zero_shot").prepare(tiny_lm(), bench, "rivers", store=store)


def test_a_new_technique_is_one_class_and_one_registration(bench, store):
    class EchoParams(Params):
        word: str = "no"

    class EchoAbstainer(Abstainer):
        technique = "echo"

        def __init__(self, target, word):
            self.target, self.word = target, word

        def generate(self, questions, config=None, progress=True):
            return [self.word for _ in questions]

    @register
    class Echo(Technique):
        name, nature, access, Params, saves_artifacts = (
            "echo",
            "inference-time",
            "black-box",
            EchoParams,
            False,
        )

        def build(self, lm, bench, data, directory, *, seed, progress):
            return EchoAbstainer(data.target, self.params.word)

    try:
        ab = get_technique("echo", word="nope").prepare(tiny_lm(), bench, "river", store=store)
        assert ab.generate(Q) == ["nope", "nope"]
    finally:
        TECHNIQUES.unregister("echo")


def test_training_data_never_contains_evaluation_questions(bench):
    d = target_data(bench, "river")
    eval_questions = {q for s in bench.questions for q in s.eval}
    used = d.related + d.unrelated + d.val_related + d.val_unrelated
    assert not {q.question for q in used} & eval_questions
    assert {q.relation for q in d.related} == {"target", "descendant"}
    assert all(q.concept_id in ("river", "nile", "danube") for q in d.related)
    assert all(q.concept_id not in ("river", "nile", "danube") for q in d.unrelated)
    near = {q.concept_id for q in d.unrelated if q.relation != "unrelated"}
    assert near == set(bench.near_concepts("river"))  # SELECT: ancestors and siblings
    assert {"parent", "sibling"} & {q.relation for q in d.unrelated}
    assert len(d.related) == 20 and len(d.unrelated) == 20
    assert target_data(bench, "river").fingerprint() == d.fingerprint()
    assert target_data(bench, "river", seed=1).fingerprint() != d.fingerprint()


def test_zero_shot_puts_the_instruction_in_the_system_prompt(bench, store):
    lm = tiny_lm()
    ab = get_technique("zero_shot").prepare(lm, bench, "river", store=store)
    assert "rivers" in ab.system
    lp = GenerationConfig(max_new_tokens=2, return_logprobs=True)
    told = ab.generate(Q, lp, progress=False)
    plain = generate(lm, Q, lp, progress=False)
    assert len(told) == 2 and told[0].logprobs != plain[0].logprobs


def test_few_shot_examples_abstain_on_target_and_descendants_and_answer_the_rest(bench, store):
    lm = tiny_lm()
    ab = get_technique("few_shot_cot").prepare(lm, bench, "river", store=store)
    assert len(ab.examples) == 6
    abstaining = [a for _, a in ab.examples if "I'm sorry, but I can't help" in a]
    answering = [a for _, a in ab.examples if "so I can answer" in a]
    assert len(abstaining) == 3 and len(answering) == 3
    conv = ab.conversation("What is a river?")
    assert len(conv) == 13 and conv[-1]["content"] == "What is a river?"


def test_artifacts_are_reused_and_mismatches_are_errors(bench, store, monkeypatch):
    lm = tiny_lm()
    tech = get_technique("few_shot_cot")
    first = tech.prepare(lm, bench, "river", store=store)
    calls = []
    monkeypatch.setattr(type(tech), "build", lambda *a, **k: calls.append(1))
    again = get_technique("few_shot_cot").prepare(lm, bench, "river", store=store)
    assert calls == [] and again.examples == first.examples  # reloaded, not rebuilt
    monkeypatch.undo()
    other = get_technique("few_shot_cot", n_retain=2).prepare(lm, bench, "river", store=store)
    assert len(other.examples) == 5  # other parameters: a new artifact
    path = store.path_for(tech.meta(lm, tech.data(bench, "river"), 0))
    other_model = tiny_lm(seed=1)
    with pytest.raises(ArtifactMismatchError, match="revision: saved 'seed-0', asked 'seed-1'"):
        get_technique("few_shot_cot").prepare(other_model, bench, "river", artifact=path)


def test_steering_prepares_vectors_and_steers_only_what_fires(bench, store):
    lm = tiny_lm()
    ab = get_technique("steering").prepare(lm, bench, "river", store=store)
    assert 1 <= len(ab.steerer.condition.layers) <= 3
    assert len(ab.table) == lm.num_layers
    decisions = ab.decide(Q)
    gens = ab.generate(Q, CFG, progress=False)
    plain = generate(lm, Q, CFG, progress=False)
    for d, g, p in zip(decisions.tolist(), gens, plain):
        if not d:
            assert g.token_ids == p.token_ids


def test_gate_decisions_are_kept_and_agree_between_separate_and_in_pass_decisions(bench, store):
    lm = tiny_lm()
    separate = get_technique("steering").prepare(lm, bench, "river", store=store)
    separate.generate(Q, CFG, progress=False)
    assert separate.gate_decisions.tolist() == separate.decide(Q).tolist()
    in_pass = get_technique("steering", decision="in_pass", condition_before_behavior=True).prepare(
        lm, bench, "river", store=store
    )
    in_pass.generate(Q, CFG, progress=False)
    assert in_pass.gate_decisions.tolist() == in_pass.decide(Q).tolist()
    assert all(
        row.layer < min(in_pass.steerer.plan.layers)
        for row in in_pass.table
        if row.layer in in_pass.steerer.condition.layers
    )


@pytest.mark.parametrize("name", ["sft", "sft_dpo"])
def test_fine_tuning_trains_an_adapter_and_leaves_the_base_model_untouched(bench, store, name):
    lm = tiny_lm()
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    ab = get_technique(name, **FAST_SFT).prepare(lm, bench, "river", store=store)
    after = lm.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    tuned = ab.adapted.model.state_dict()
    changed = [k for k in before if not torch.equal(before[k], tuned[k])]
    assert changed and not any("k_proj" in k or "embed" in k for k in changed)
    assert any("q_proj" in k for k in changed) and any("down_proj" in k for k in changed)
    ab.close()
    with pytest.raises(RuntimeError, match="closed"):
        ab.generate(Q)


def test_a_model_on_the_cpu_trains_there_on_a_machine_with_a_gpu(monkeypatch):
    """Where the model is decides where LoRA trains, not whether the machine has a GPU (a CPU
    run beside a GPU would otherwise train on the GPU and answer from there)."""
    from workbench.finetuning.lora import FinetuneParams, _common_args

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    args = _common_args(tiny_lm().model, FinetuneParams(bf16=True), 0, False, 1e-4, 1)
    assert args["use_cpu"] is True and args["bf16"] is False
