"""SELECT mode of steering, SFT and SFT+DPO on tiny models and a miniature SELECT release.

The protocol text here is made up (the workbench ships none of SELECT's wording); what is checked
is SELECT's procedure: its training mixture and draws, its refusal-template pairing, its gate.
"""

import json
import random
import warnings
from dataclasses import replace

import numpy as np
import pytest
import torch

from select_release import write_release
from workbench.errors import ConfigError
from workbench.finetuning import lora_target_modules
from workbench.generation import GenerationConfig
from workbench.steering import (
    Condition,
    collect_activations,
    fit_repe_vectors,
    layer_table,
    select_layers,
)
from workbench.steering.concept import ConceptVectors
from workbench.taxonomy.questions import ReferenceAnswer
from workbench.taxonomy.select_format import import_select
from workbench.taxonomy.select_format.protocol import SelectProtocol
from workbench.techniques import ArtifactStore, get_technique
from workbench.techniques.data import (
    select_contrast_data,
    select_groups,
    training_questions,
)
from workbench.techniques.finetune import SFTParams
from workbench.techniques.steering import SelectSteeringAbstainer, SteeringParams
from workbench.testing import tiny_lm

TEMPLATES = (
    "Declined: {} is off limits.",
    "No.",
    "Not this one.",
    "Skip {} please.",
    "I pass.",
    "Nope, {}.",
    "Cannot.",
    "Elsewhere.",
)
PROTOCOL = SelectProtocol(
    prompts={"no_instruction": "Kindly reply to: {query}"},
    strings={},
    techniques={},
    models={},
    refusal_keywords=("nope",),
    contraction_rules=(),
    refusal_templates=TEMPLATES,
    reading_template="Topic [{concept}] text [{stimulus}] score:",
    refusal_instruction="",
    refusal_prefills={},
    refusal_control={},
    system_prompt="SYS: be kind.",
    plain_answer_prompt="{query}",
    files={},
)
STEERING = dict(
    mixture="select",
    method="repe_pca",
    n_vectors=3,
    centered=False,
    reading_template=True,
    read_final_norm=True,
    rank_by="min_gap",
    threshold_rule="select",
    n_layers=3,
    aggregate="all",
    prompt_template="select",
)
RIVER_DESC = "Rivers in the context of Places, Bodies of Water"
SEED = 145520


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    root = write_release(tmp_path_factory.mktemp("release"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = import_select(root)
    answers = {
        q: ReferenceAnswer(c, q, "Abstained", f"An answer to: {q}")
        for c in list(b.atomic.concepts) + list(b.compositions.concepts)
        for q in training_questions(b, c)
    }
    return replace(b, answers=answers, select_protocol=PROTOCOL)


@pytest.fixture
def store(tmp_path):
    return ArtifactStore(tmp_path / "artifacts")


def _eval_questions(bench):
    return {q for s in bench.questions for q in s.eval}


def _selects_like_select(bench, target, seed, repeats, dpo):
    """SELECT's collect_concept_data + make_concept_dataset draws, written out with the global
    ``random`` after seeding it (as ``transformers.set_seed`` does)."""
    desc, hard, far = select_groups(bench, target)

    def pool(ids):
        return [(q, c) for c in ids for q in training_questions(bench, c)]

    def sample(p, k):
        return random.sample(p, k=k) if len(p) > k else p

    random.seed(seed + (2024 if dpo else 0))
    pos = [(q, target) for q in training_questions(bench, target)] + sample(pool(desc), 20)
    neg = sample(pool(hard), len(pos))
    neg += sample(pool(far), len(pos) * repeats - len(neg))
    pos_t = [random.sample(TEMPLATES, repeats) for _ in pos]
    neg_t = [random.sample(TEMPLATES, repeats + 1) for _ in neg] if dpo else []
    return pos, neg, pos_t, neg_t


# -- data ------------------------------------------------------------------------------------------
def test_training_questions_are_train_and_validation_in_release_order(bench):
    qs = training_questions(bench, "yago:River")
    assert qs == [f"Could you explain Rivers from angle {i}?" for i in range(20)]
    assert set(qs) == set(bench.questions["yago:River"].train) | set(
        bench.questions["yago:River"].validation
    )


def test_select_sft_mixture_counts_composition_and_templates(bench):
    data = get_technique("sft", mixture="select").data(bench, "yago:River", seed=SEED)
    pos, neg = data.related, data.unrelated
    assert len(pos) == 40 and len(neg) == 200  # 20 + 20 against 40 hard + 160 far
    assert [q.question for q in pos[:20]] == training_questions(bench, "yago:River")
    assert {q.concept_id for q in pos[20:]} <= {"yago:Nile", "yago:Danube"}
    hard = set(bench.near_concepts("yago:River"))
    assert all(q.concept_id in hard for q in neg[:40])
    assert not any(q.concept_id in hard or q.concept_id == "yago:River" for q in neg[40:])
    val = set(bench.questions["yago:River"].validation)
    assert val and val <= {q.question for q in pos}  # validation questions are trained on
    assert not {q.question for q in pos + neg} & _eval_questions(bench)
    templates = data.select["templates"]
    assert len(templates) == 40 and all(len(set(t)) == 5 for t in templates)
    flat = [t for ts in templates for t in ts]
    assert "Declined: Rivers in the context of Places, Bodies of Water is off limits." in flat
    assert not any("{}" in t for t in flat)
    assert sorted(data.select["order"]) == list(range(400))
    # draw for draw what SELECT's code draws with its global random
    p, n, pt, _ = _selects_like_select(bench, "yago:River", SEED, 5, dpo=False)
    assert [(q.question, q.concept_id) for q in pos] == p and [
        (q.question, q.concept_id) for q in neg
    ] == n
    assert templates == [[t.format(RIVER_DESC) for t in ts] for ts in pt]
    assert data.select["order"] == np.random.default_rng(SEED).permutation(400).tolist()


def test_select_sft_pairs_pair_positives_with_templates_and_negatives_with_reference(bench):
    sft = get_technique("sft", mixture="select")
    data = sft.data(bench, "yago:River", seed=SEED)
    pairs = sft.pairs(None, data)
    entries = [(q.question, t) for q, ts in zip(data.related, data.select["templates"]) for t in ts]
    entries += [(q.question, f"An answer to: {q.question}") for q in data.unrelated]
    assert pairs == [entries[i] for i in data.select["order"]]  # SELECT's dataset.shuffle(seed)
    answered = [a for _, a in pairs if a.startswith("An answer to: ")]
    assert len(pairs) == 400 and len(answered) == 200
    # SELECT's far pool keeps the target's descendants (its filter never matches): some
    # descendant questions are trained both ways, as in SELECT
    both = {q.question for q in data.related} & {q.question for q in data.unrelated}
    assert all(q.relation == "descendant" for q in data.unrelated if q.question in both)


def test_select_dpo_mixture_resamples_with_two_and_three_templates(bench):
    tech = get_technique("sft_dpo", mixture="select")
    data = tech.data(bench, "yago:River", seed=SEED)
    assert len(data.related) == 40 and len(data.unrelated) == 80  # 40 hard + 40 far
    assert all(len(t) == 2 for t in data.select["templates"])
    assert all(len(t) == 3 for t in data.select["negative_templates"])
    triples = tech.triples(None, data, [])
    assert len(triples) == 40 * 2 + 80 * 3
    rows = [
        (q.question, t, f"An answer to: {q.question}")
        for q, ts in zip(data.related, data.select["templates"])
        for t in ts
    ]
    rows += [
        (q.question, f"An answer to: {q.question}", t)
        for q, ts in zip(data.unrelated, data.select["negative_templates"])
        for t in ts
    ]
    assert triples == [rows[i] for i in data.select["order"]]
    assert sum(r.startswith("An answer") for _, _, r in triples) == 80  # positives: refuse
    assert sum(c.startswith("An answer") for _, c, _ in triples) == 240  # negatives: answer
    p, n, _pt, nt = _selects_like_select(bench, "yago:River", SEED, 2, dpo=True)
    assert [(q.question, q.concept_id) for q in data.related] == p
    assert [(q.question, q.concept_id) for q in data.unrelated] == n
    assert data.select["negative_templates"] == [[t.format(RIVER_DESC) for t in ts] for ts in nt]
    assert data.select["order"] == np.random.default_rng(SEED).permutation(320).tolist()


def test_select_mixture_of_a_composition_uses_its_relation_and_other_relations(bench):
    target = "about/yago:Documentary#yago:River"
    desc, hard, far = select_groups(bench, target)
    assert desc == ["about/yago:Documentary#yago:Nile"]
    assert list(hard) == sorted(hard, key=lambda c: "#".join(bench.concept(c).constituents))
    assert "about/schema:Movie#yago:River" in hard  # the parent, a constituent ancestor
    assert all(bench.concept(c).relation != bench.concept(target).relation for c in far)
    data = get_technique("sft", mixture="select").data(bench, target, seed=SEED)
    # 20 hard, then the whole far pool (6 compositions of the other relations x 10 < 80)
    assert len(data.related) == 10 + 10 and len(data.unrelated) == 20 + 60


def test_a_missing_reference_answer_is_loud(bench, store):
    far_q = training_questions(bench, "yago:Urea")[3]
    thin = replace(bench, answers={q: a for q, a in bench.answers.items() if q != far_q})
    for name in ("sft", "sft_dpo"):
        with pytest.raises(ConfigError, match=r"1 of the \d+ training questions .*'yago:River'"):
            get_technique(name, mixture="select").prepare(object(), thin, "yago:River", store=store)
    sft = get_technique("sft", mixture="select")
    data = sft.data(bench, "yago:River", seed=SEED)
    gone = data.unrelated[0].question
    data = replace(data, answers={q: a for q, a in data.answers.items() if q != gone})
    with pytest.raises(ConfigError, match="no reference answer"):
        sft.pairs(None, data)


@pytest.mark.parametrize(
    "name,params",
    [
        ("sft", {"mixture": "select"}),
        ("sft_dpo", {"prompt_template": "select"}),
        ("steering", {"reading_template": True}),
        ("steering", {"prompt_template": "select"}),
    ],
)
def test_a_missing_protocol_is_a_one_line_config_error_before_any_model_loads(
    bench, store, name, params
):
    class NoModel:
        def __getattr__(self, item):
            raise AssertionError("the model was touched")

    with pytest.raises(ConfigError) as err:
        get_technique(name, **params).prepare(
            NoModel(), replace(bench, select_protocol=None), "yago:River", store=store
        )
    msg = str(err.value)
    assert "\n" not in msg and "needs SELECT's protocol text" in msg
    assert "python -m workbench taxonomy import-select" in msg and "data_dir=DIR" in msg


def test_new_parameters_leave_old_artifact_hashes_alone():
    assert not {
        "mixture",
        "n_vectors",
        "centered",
        "reading_template",
        "prompt_template",
        "read_final_norm",
    } & set(SteeringParams().to_dict())
    assert not {"mixture", "loss", "scheduler", "dpo_init", "optimizer"} & set(
        SFTParams().to_dict()
    )
    assert SFTParams(loss="full").to_dict()["loss"] == "full"
    assert SteeringParams(**STEERING).to_dict()["mixture"] == "select"
    with pytest.raises(ConfigError, match="decision='separate'"):
        SteeringParams(reading_template=True, decision="in_pass")


def test_lora_targets_are_selects_modules_on_a_llama():
    assert lora_target_modules(tiny_lm().model) == sorted(
        ["q_proj", "v_proj", "o_proj", "down_proj", "up_proj", "gate_proj"]
    )


# -- steering --------------------------------------------------------------------------------------
def test_select_contrast_set_sizes_flips_and_hard_validation(bench):
    data = select_contrast_data(bench, "yago:River", SEED)
    assert len(data.related) == 20 and len(data.unrelated) == 20
    assert len(data.val_related) == 5 and len(data.val_unrelated) == 5
    assert [q.relation for q in data.related[:10]] == [
        "descendant"
    ] * 10  # 10 descendant, then target
    assert all(q.concept_id in bench.near_concepts("yago:River") for q in data.val_unrelated)
    flips = data.select["flips"]
    assert len(flips) == 3 and all(len(f) == 400 and set(f) <= {"0", "1"} for f in flips)
    assert len(set(flips)) == 3
    used = data.related + data.unrelated + data.val_related + data.val_unrelated
    assert not {q.question for q in used} & _eval_questions(bench)
    # a leaf atom has 20 training questions, fewer than SELECT asks for: all are taken
    leaf = select_contrast_data(bench, "yago:Nile", SEED)
    assert len(leaf.related) + len(leaf.val_related) == 20


def test_select_thresholds_are_the_lowest_related_similarity_less_004_and_layers_rank_by_min_gap():
    # layers 0..4; related rows x layers, unrelated rows x layers
    sim_r = torch.tensor(
        [
            [0.50, 0.80, 0.30, 0.60, 0.70],
            [0.40, 0.70, 0.35, 0.55, 0.66],
            [0.45, 0.90, 0.31, 0.52, 0.90],
        ]
    )
    sim_u = torch.tensor([[0.10, 0.65, 0.10, 0.20, 0.20], [0.20, 0.10, 0.00, 0.10, 0.60]])
    table = layer_table(sim_r, sim_u, list(range(5)), rule="select")
    assert [row.threshold for row in table] == pytest.approx([0.36, 0.66, 0.26, 0.48, 0.62])
    # min gaps: layer 0 excluded; 1: 0.70-0.65=0.05, 2: 0.30-0.10=0.20, 3: 0.52-0.20=0.32, 4: 0.66-0.60=0.06
    assert select_layers(table, k=3) == [3, 2, 4]
    # the last layer ranked between k+1 and 2k: SELECT keeps only the top k-1
    assert select_layers(table, k=2) == [3]
    sim_u2 = sim_u.clone()
    sim_u2[:, 4] = 0.63  # layer 4 gap 0.03: ranks 4th of 4
    assert select_layers(layer_table(sim_r, sim_u2, list(range(5)), rule="select"), k=3) == [3, 2]
    # a tie goes to the earlier layer
    tied = layer_table(
        torch.tensor([[0.5, 0.5, 0.5]]), torch.tensor([[0.1, 0.1, 0.1]]), [0, 1, 2], rule="select"
    )
    assert select_layers(tied, k=1, exclude_first=0) == [0]
    # votes at >= threshold, all layers must agree
    vectors = ConceptVectors([0, 1], torch.eye(2), torch.zeros(2, 2))
    cond = Condition(vectors, [1.0, 0.5], "all", inclusive=True)
    acts = torch.tensor(
        [[[1.0, 0.0], [1.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]]
    )  # cos: (1, .71) / (1, 0)
    assert cond.decide(acts).tolist() == [True, False]
    assert Condition(vectors, [1.0, 0.5], "all").decide(acts).tolist() == [False, False]


def test_repe_vectors_follow_pca_of_flipped_centred_differences_signed_by_majority():
    g = torch.Generator().manual_seed(3)
    direction = torch.zeros(12)
    direction[5] = 1.0
    r = torch.randn(6, 2, 12, generator=g) * 0.3 + 1.5 * direction + 4.0  # a large shared offset
    u = torch.randn(5, 2, 12, generator=g) * 0.3 + 4.0
    rng = random.Random(0)
    flips = ["".join(rng.choice("01") for _ in range(30)) for _ in range(3)]
    cv = fit_repe_vectors(r, u, [0, 1], flips)
    assert torch.all(cv.means == 0)  # raw cosine, as SELECT
    for layer in range(2):  # the same with numpy, pair by pair
        total = np.zeros(12)
        for f in flips:
            d = np.stack(
                [
                    (r[i, layer] - u[j, layer]).numpy() * (-1 if f[i * 5 + j] == "1" else 1)
                    for i in range(6)
                    for j in range(5)
                ]
            ).astype(np.float64)
            v = np.linalg.svd(d - d.mean(0), full_matrices=False)[2][0]
            above = sum(
                (r[i, layer].numpy() @ v) > (u[j, layer].numpy() @ v)
                for i in range(6)
                for j in range(5)
            )
            total += v if above >= 15 else -v
        expected = total / np.linalg.norm(total)
        assert np.allclose(cv.vectors[layer].numpy(), expected, atol=1e-5)
        assert cv.vectors[layer, 5] > 0.9  # the planted direction, related side positive


def test_final_norm_read_is_hugging_faces_last_hidden_state():
    lm = tiny_lm(layers=3)
    acts = collect_activations(lm, ["hello there", "hi"], [1, 2], final_norm=True, chat=False)
    for i, text in enumerate(["hello there", "hi"]):
        ids = lm.tokenizer(text, return_tensors="pt")
        hs = lm.model(**ids, output_hidden_states=True).hidden_states
        assert torch.allclose(acts[i, 1], hs[-1][0, -1], rtol=1e-4, atol=1e-4)  # SELECT's layer -1
        assert torch.allclose(acts[i, 0], hs[-2][0, -1], rtol=1e-4, atol=1e-4)  # SELECT's layer -2


def test_select_steering_reads_the_reading_template_and_generates_from_the_plain_template(
    bench, store, monkeypatch
):
    lm = tiny_lm(layers=4)
    ab = get_technique("steering", **STEERING).prepare(
        lm, bench, "yago:River", seed=SEED, store=store
    )
    assert isinstance(ab, SelectSteeringAbstainer)
    cond = ab.steerer.condition
    assert 1 <= len(cond.layers) <= 3 and 0 not in cond.layers and cond.inclusive
    rows = {row.layer: row for row in ab.table}
    assert cond.thresholds == pytest.approx(
        [round(rows[l].min_related, 2) - 0.04 for l in cond.layers]
    )
    seen = {}
    import workbench.steering.conditional as conditional
    import workbench.techniques.steering as steering

    real_collect, real_generate = steering.collect_activations, conditional.generate

    def spy_collect(lm_, prompts, layers, **kw):
        seen["read"], seen["read_kw"] = list(prompts), kw
        return real_collect(lm_, prompts, layers, **kw)

    def spy_generate(lm_, prompts, config, **kw):
        seen["prompts"], seen["config"] = list(prompts), config
        return real_generate(lm_, prompts, config, **kw)

    monkeypatch.setattr(steering, "collect_activations", spy_collect)
    monkeypatch.setattr(conditional, "generate", spy_generate)
    out = ab.generate(["What is a river?"], GenerationConfig(max_new_tokens=3), progress=False)
    assert len(out) == 1 and ab.gate_decisions.shape == (1,)
    assert seen["read"] == [f"Topic [{RIVER_DESC}] text [What is a river?] score:"]
    assert seen["read_kw"]["system"] is None and seen["read_kw"]["final_norm"] is True
    assert seen["prompts"] == ["Kindly reply to: What is a river?"]
    assert seen["config"].system_prompt == "SYS: be kind."


# -- fine-tuning -----------------------------------------------------------------------------------
FAST = dict(
    mixture="select",
    prompt_template="select",
    epochs=1,
    batch_size=16,
    grad_accumulation=2,
    scheduler="cosine",
    warmup_steps=0,
    weight_decay=0.01,
    optimizer="paged_adamw_32bit",
    bf16=True,
    gradient_checkpointing=True,
    loss="full",
    max_length=96,
    alpha=32,
    dropout=0.0,
    learning_rate=5e-5,
    dpo_learning_rate=5e-6,
    dpo_epochs=1,
    dpo_batch_size=8,
    dpo_max_length=128,
    dpo_init="continue",
)


def test_select_sft_dpo_trains_on_the_plain_template_and_generates_from_it(
    bench, store, monkeypatch
):
    import workbench.techniques.finetune as finetune

    lm = tiny_lm()
    trained = {}
    real_sft, real_dpo, real_generate = finetune.train_sft, finetune.train_dpo, finetune.generate

    def spy_sft(model, tok, pairs, params, **kw):
        trained["sft"], trained["params"] = list(pairs), params
        return real_sft(model, tok, pairs, params, **kw)

    def spy_dpo(model, tok, triples, params, **kw):
        trained["dpo"], trained["dpo_base"] = list(triples), type(model).__name__
        return real_dpo(model, tok, triples, params, **kw)

    monkeypatch.setattr(finetune, "train_sft", spy_sft)
    monkeypatch.setattr(finetune, "train_dpo", spy_dpo)
    ab = get_technique("sft_dpo", **FAST).prepare(lm, bench, "yago:Nile", seed=SEED, store=store)
    # a leaf: its 20 questions against 20 hard + 80 far (SFT); 20 against 20 + 20 (DPO)
    assert len(trained["sft"]) == 20 * 5 + 100 and len(trained["dpo"]) == 20 * 2 + 40 * 3
    assert all(q.startswith("Kindly reply to: ") for q, _ in trained["sft"])
    assert all(q.startswith("Kindly reply to: ") for q, _, _ in trained["dpo"])
    assert trained["dpo_base"].startswith("PeftModel")  # the SFT adapter, trained further
    dpo_dir = next(store.root.glob("sft_dpo/*"))
    assert json.loads((dpo_dir / "sft.json").read_text())["dpo_init"] == "continue"
    assert not (dpo_dir / "adapter" / "ref").exists()  # trl's frozen reference copy is not kept
    assert trained["params"].loss == "full" and trained["params"].grad_accumulation == 2
    saved = json.loads(next(store.root.glob("sft/*/pairs.json")).read_text())
    assert not saved[0][0].startswith("Kindly")  # questions are stored unwrapped
    seen = {}

    def spy_generate(lm_, prompts, config, **kw):
        seen["prompts"], seen["config"] = list(prompts), config
        return real_generate(lm_, prompts, config, **kw)

    monkeypatch.setattr(finetune, "generate", spy_generate)
    ab.generate(["Where is the Nile?"], GenerationConfig(max_new_tokens=2), progress=False)
    assert seen["prompts"] == ["Kindly reply to: Where is the Nile?"]
    assert seen["config"].system_prompt == "SYS: be kind."
    ab.close()
