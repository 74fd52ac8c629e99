"""Steering internals on tiny models: parity of the pair PCA, hook sites, conditional rows."""

import pytest
import torch

from workbench.generation import GenerationConfig, StepState, attached, generate
from workbench.models import render_chat
from workbench.steering import (
    Condition,
    ConditionalSteerer,
    SteeringPlan,
    choose_layers,
    collect_activations,
    fit_concept_vectors,
    layer_table,
    pair_scatter,
)
from workbench.steering.concept import ConceptVectors, pair_scatter_chunked

PROMPTS = [
    "What is a river?",
    "Tell me about mountains in some detail please.",
    "hi",
    "Who was the first physicist?",
    "Name a famous brook.",
]


def test_closed_form_pair_scatter_matches_explicit_chunked_pairs():
    g = torch.Generator().manual_seed(0)
    r, u = torch.randn(13, 3, 8, generator=g), torch.randn(7, 3, 8, generator=g)
    assert torch.allclose(pair_scatter(r, u), pair_scatter_chunked(r, u, chunk=4), atol=1e-8)


def test_concept_vector_recovers_the_planted_direction():
    g = torch.Generator().manual_seed(1)
    direction = torch.zeros(16)
    direction[3] = 1.0
    base = torch.randn(40, 2, 16, generator=g) * 0.3
    related, unrelated = base[:20] + 2.0 * direction, base[20:]
    cv = fit_concept_vectors(related, unrelated, [0, 1])
    assert torch.allclose(cv.vectors[:, 3], torch.ones(2), atol=0.05)  # aligned and oriented
    sims_r, sims_u = cv.similarities(related), cv.similarities(unrelated)
    assert (sims_r.mean(0) > sims_u.mean(0) + 0.5).all()


def test_layer_table_thresholds_and_choice():
    sim_r = torch.tensor([[0.9, 0.2], [0.7, 0.1], [0.8, 0.3]])
    sim_u = torch.tensor([[0.1, 0.2], [0.3, 0.1]])
    old = layer_table(sim_r, sim_u, [4, 5], adjust=0.5, rule="min_related")[0]
    assert old.gap == pytest.approx(0.8 - 0.2)
    assert old.threshold == pytest.approx(0.7 + 0.5 * (0.5 - 0.7))  # min related toward midpoint
    table = layer_table(sim_r, sim_u, [4, 5])
    row = table[0]
    assert row.auroc == 1.0 and row.tpr == 1.0 and row.fpr == 0.0
    assert 0.3 < row.threshold < 0.7  # Youden: anywhere between the groups separates them
    assert table[1].auroc == pytest.approx(4 / 6)  # ties count half
    assert choose_layers(table, k=1, exclude_first=0) == [4]
    assert choose_layers(table, k=3, exclude_first=0, rank_by="gap") == [4, 5]  # both gaps positive


def test_a_layer_at_chance_is_flagged_and_never_chosen_unless_nothing_separates():
    sim_r = torch.tensor([[0.9, 0.2], [0.7, 0.1], [0.8, 0.15]])
    sim_u = torch.tensor([[0.1, 0.2], [0.3, 0.1]])
    table = layer_table(sim_r, sim_u, [4, 5])
    assert table[1].auroc == pytest.approx(0.5)
    assert not table[0].at_chance and table[1].at_chance
    assert choose_layers(table, k=3, exclude_first=0) == [4]
    flat = layer_table(torch.tensor([[0.1], [0.2]]), torch.tensor([[0.2], [0.1]]), [3])
    assert flat[0].at_chance
    with pytest.warns(UserWarning, match="no layer separates the concept"):
        assert choose_layers(flat, k=2, exclude_first=0) == [3]


def test_gate_keeps_the_layer_count_that_votes_best_on_validation():
    from workbench.steering import choose_gate

    # layer 0 separates alone; layer 1 adds a false negative under AND: one layer is kept
    sim_r = torch.tensor([[0.9, 0.9], [0.8, 0.1], [0.7, 0.8]])
    sim_u = torch.tensor([[0.1, 0.0], [0.2, 0.05]])
    table = layer_table(sim_r, sim_u, [0, 1])
    assert choose_gate(table, sim_r, sim_u, k=2, aggregate="all", exclude_first=0) == [0]


def test_pc1_and_mean_difference_agree_on_a_clean_concept():
    from workbench.steering import direction_agreement

    g = torch.Generator().manual_seed(3)
    direction = torch.zeros(16)
    direction[5] = 1.0
    base = torch.randn(40, 1, 16, generator=g) * 0.2
    r, u = base[:20] + 2.0 * direction, base[20:]
    assert direction_agreement(r, u)[0] > 0.99
    md = fit_concept_vectors(r, u, [0], method="mean_diff")
    assert md.vectors[0, 5] > 0.99
    # phrasing variance larger than the concept: PC1 follows it, the mean difference does not
    noise = torch.zeros(16)
    noise[9] = 1.0
    wobble = torch.randn(20, 1, 1, generator=g) * 6.0 * noise  # the same phrasings in both groups
    r2, u2 = r + wobble, u + wobble
    assert abs(float(direction_agreement(r2, u2)[0])) < 0.5
    assert fit_concept_vectors(r2, u2, [0], method="mean_diff").vectors[0, 5] > 0.8
    with pytest.raises(ValueError, match="method must be one of"):
        fit_concept_vectors(r, u, [0], method="pca")


def test_condition_aggregates_votes():
    cv = ConceptVectors([0, 1, 2], torch.eye(3), torch.zeros(3, 3))
    acts = torch.tensor([[[1.0, 0, 0], [0, 1.0, 0], [0, 0, -1.0]]])  # sims: 1, 1, -1 per layer
    votes = Condition(cv, [0.5, 0.5, 0.5], "majority").votes(acts)
    assert votes.tolist() == [[True, True, False]]
    assert Condition(cv, [0.5] * 3, "majority").decide(acts).tolist() == [True]
    assert Condition(cv, [0.5] * 3, "all").decide(acts).tolist() == [False]
    assert Condition(cv, [2.0] * 3, "any").decide(acts).tolist() == [False]


@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_activations_do_not_depend_on_the_batch(tiny, pooling):
    batched = collect_activations(tiny, PROMPTS, [0, 1], pooling=pooling, batch_size=8)
    for i, p in enumerate(PROMPTS):
        alone = collect_activations(tiny, [p], [0, 1], pooling=pooling)
        assert torch.allclose(alone[0], batched[i], rtol=1e-4, atol=1e-4)


def test_last_token_read_equals_the_residual_stream_of_a_plain_forward(tiny):
    text = render_chat(tiny.tokenizer, PROMPTS[0])
    ids = tiny.tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        hs = tiny.model(ids, output_hidden_states=True).hidden_states
    acts = collect_activations(tiny, [PROMPTS[0]], [0, 1])
    # hidden_states[l + 1] is block l's output (the last one after the final norm)
    assert torch.allclose(acts[0, 0], hs[1][0, -1], atol=1e-5)


def test_the_read_site_is_the_add_site(tiny):
    """Adding v at layer l shows up as exactly +v when layer l is read: no off-by-one."""
    v = torch.randn(tiny.model.config.hidden_size)
    plain = collect_activations(tiny, [PROMPTS[0]], [1])
    plan = SteeringPlan([1], v[None], strength=2.0)
    state = StepState(rows=torch.tensor([0]))
    with attached(tiny.model, plan.hooks(tiny.model, torch.tensor([True])), state):
        steered = collect_activations(tiny, [PROMPTS[0]], [1])
    assert torch.allclose(steered[0, 0] - plain[0, 0], 2.0 * v, atol=1e-4)


def _plan(tiny, strength=4.0):
    g = torch.Generator().manual_seed(3)
    return SteeringPlan(
        [0, 1], torch.randn(2, tiny.model.config.hidden_size, generator=g), strength
    )


def test_only_rows_whose_condition_fired_are_steered_and_batching_does_not_matter(tiny):
    cfg = GenerationConfig(max_new_tokens=8, batch_size=8)
    steerer = ConditionalSteerer(None, _plan(tiny))
    fire = torch.tensor([True, False, True, False, False])
    mixed = steerer.generate(tiny, PROMPTS, cfg, decisions=fire, progress=False)
    plain = generate(tiny, PROMPTS, cfg, progress=False)
    always = steerer.generate(tiny, PROMPTS, cfg, progress=False)
    for i in range(len(PROMPTS)):
        expected = always[i] if fire[i] else plain[i]
        assert mixed[i].token_ids == expected.token_ids, i
        alone = steerer.generate(tiny, [PROMPTS[i]], cfg, decisions=fire[i : i + 1], progress=False)
        assert alone[0].token_ids == mixed[i].token_ids
    assert any(always[i].token_ids != plain[i].token_ids for i in range(len(PROMPTS)))


def test_cached_and_uncached_steered_generation_agree(tiny):
    plan = _plan(tiny)
    steerer = ConditionalSteerer(None, plan)
    cached = steerer.generate(
        tiny, [PROMPTS[1]], GenerationConfig(max_new_tokens=6), progress=False
    )[0]
    # reference: recompute the whole sequence at every step, no KV cache
    ids = tiny.tokenizer(
        render_chat(tiny.tokenizer, PROMPTS[1]), return_tensors="pt", add_special_tokens=False
    )["input_ids"]
    state = StepState(rows=torch.tensor([0]))
    out = []
    with torch.no_grad(), attached(tiny.model, plan.hooks(tiny.model, torch.tensor([True])), state):
        for _ in range(6):
            nxt = tiny.model(ids, use_cache=False).logits[0, -1].argmax().item()
            out.append(nxt)
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    assert cached.token_ids == out


def test_condition_decides_per_prompt_from_its_own_activations(tiny):
    layers = [0, 1]
    acts = collect_activations(tiny, PROMPTS, layers)
    cv = fit_concept_vectors(acts[:2], acts[2:], layers)
    sims = cv.similarities(acts)
    # thresholds half-way between neighbouring prompts, so float noise cannot flip a decision
    mid = [float(sims[:, j].sort().values[2:4].mean()) for j in range(2)]
    cond = Condition(cv, mid, "all")
    steerer = ConditionalSteerer(cond, _plan(tiny))
    decided = steerer.decide(tiny, PROMPTS)
    assert decided.tolist() == cond.decide(acts).tolist()
    # and decisions are the same when asked one prompt at a time
    assert [steerer.decide(tiny, [p]).item() for p in PROMPTS] == decided.tolist()


def _conditional(tiny, cond_layers=(1,), behavior=(0, 1)):
    """A steerer whose condition fires on about half of PROMPTS."""
    acts = collect_activations(tiny, PROMPTS, list(cond_layers))
    cv = fit_concept_vectors(acts[:2], acts[2:], list(cond_layers))
    sims = cv.similarities(acts)
    mid = [float(sims[:, j].sort().values[2:4].mean()) for j in range(len(cond_layers))]
    g = torch.Generator().manual_seed(5)
    plan = SteeringPlan(
        list(behavior), torch.randn(len(behavior), tiny.model.config.hidden_size, generator=g), 4.0
    )
    return ConditionalSteerer(Condition(cv, mid, "all"), plan)


@pytest.mark.parametrize("mode", ["in_pass", "separate"])
def test_decisions_match_a_separate_pass_and_do_not_depend_on_the_batch(tiny, mode):
    steerer = _conditional(tiny)
    cfg = GenerationConfig(max_new_tokens=6, batch_size=8)
    mixed = steerer.generate(tiny, PROMPTS, cfg, mode=mode, progress=False)
    decided = steerer.last_decisions
    assert decided.tolist() == steerer.decide(tiny, PROMPTS).tolist()
    assert 0 < int(decided.sum()) < len(PROMPTS)
    plain = generate(tiny, PROMPTS, cfg, progress=False)
    for i, p in enumerate(PROMPTS):
        alone = steerer.generate(tiny, [p], cfg, mode=mode, progress=False)[0]
        assert alone.token_ids == mixed[i].token_ids, i
        if not decided[i]:
            assert mixed[i].token_ids == plain[i].token_ids  # unfired rows are untouched
    assert any(mixed[i].token_ids != plain[i].token_ids for i in range(len(PROMPTS)) if decided[i])
    if (
        mode == "separate"
    ):  # fired prompts are steered from their first token, as with decisions given
        upfront = steerer.generate(tiny, PROMPTS, cfg, decisions=decided, progress=False)
        assert [g.token_ids for g in upfront] == [g.token_ids for g in mixed]


def test_separate_steering_with_a_shared_prefix_cache_equals_encoding_every_prompt_whole(
    tiny, monkeypatch
):
    """The default decision reuses the cache of a shared system prompt: the vote reads only the
    last token, the fired prompts' second pass is encoded whole, so nothing changes."""
    import workbench.generation.engine as engine

    encoded = []
    real = engine._encode_prefix
    monkeypatch.setattr(
        engine, "_encode_prefix", lambda m, ids: encoded.append(len(ids)) or real(m, ids)
    )
    steerer = _conditional(tiny)
    system = (
        "You are a careful assistant. Answer in one short sentence, and never invent facts. " * 2
    )
    cfg = GenerationConfig(
        max_new_tokens=6, batch_size=3, system_prompt=system, return_logprobs=True
    )
    cached = steerer.generate(tiny, PROMPTS, cfg, progress=False)
    fired = steerer.last_decisions.clone()
    assert encoded and encoded[0] > 40  # the system prompt was encoded once, without the hooks
    whole = steerer.generate(
        tiny, PROMPTS, GenerationConfig(**{**cfg.to_dict(), "prefix_cache": False}), progress=False
    )
    assert len(encoded) == 1
    assert steerer.last_decisions.tolist() == fired.tolist()
    assert 0 < int(fired.sum()) < len(PROMPTS)
    assert [g.token_ids for g in cached] == [g.token_ids for g in whole]
    assert all(
        a == pytest.approx(b, abs=1e-4)
        for g, h in zip(cached, whole)
        for a, b in zip(g.logprobs, h.logprobs)
    )


def test_in_pass_steering_cached_equals_uncached_recompute(tiny):
    """Reference without KV cache: prompt positions are steered only at behaviour layers deeper
    than the deepest condition layer; generated positions at every behaviour layer."""
    from workbench.generation import ForwardHook, layer_module_name
    from workbench.steering.activations import hidden_of

    steerer = _conditional(tiny, cond_layers=(0,), behavior=(0, 1))
    i = int(steerer.decide(tiny, PROMPTS).nonzero()[0])
    cached = steerer.generate(
        tiny, [PROMPTS[i]], GenerationConfig(max_new_tokens=6), mode="in_pass", progress=False
    )[0]
    ids = tiny.tokenizer(
        render_chat(tiny.tokenizer, PROMPTS[i]), return_tensors="pt", add_special_tokens=False
    )["input_ids"]
    n_prompt = ids.shape[1]
    plan = steerer.plan

    def adder(k, layer):
        def add(module, args, output, state):
            h = hidden_of(output)
            start = 0 if layer > 0 else n_prompt  # layer 0 is not deeper than the condition layer
            h[:, start:] += plan.strength * plan.vectors[k]
            return output

        return add

    hooks = [
        ForwardHook(layer_module_name(tiny.model, l), adder(k, l))
        for k, l in enumerate(plan.layers)
    ]
    out = []
    with torch.no_grad(), attached(tiny.model, hooks, StepState(rows=torch.tensor([0]))):
        for _ in range(6):
            nxt = tiny.model(ids, use_cache=False).logits[0, -1].argmax().item()
            out.append(nxt)
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    assert cached.token_ids == out


def test_a_block_steered_twice_is_one_line_on_every_engine(tiny):
    """Both engines add one vector per block (vLLM keeps one per block in its bank): a plan or
    spec naming a block twice, directly or counting from the end, is refused alike."""
    from workbench.errors import ConfigError
    from workbench.steering.spec import SteerSpec

    v = torch.ones(2, tiny.model.config.hidden_size)
    with pytest.raises(ConfigError, match="behaviour layer 1 is given twice: add its vectors"):
        SteeringPlan([1, 1], v)
    with pytest.raises(ConfigError, match=r"behaviour layer -1 is given twice \(as 1\)"):
        SteeringPlan([1, -1], v).hooks(tiny.model, torch.ones(1, dtype=torch.bool))
    with pytest.raises(ConfigError, match="abstainer 'x': behaviour layer 1 is given twice"):
        SteerSpec("x", (1, 1), v, 1.0)
    with pytest.raises(ConfigError, match=r"given twice \(as 1\)"):
        SteerSpec("x", (1, -1), v, 1.0).check_model(v.shape[1], 2)


def test_a_layer_beyond_the_model_is_one_line_not_another_block(tiny):
    from workbench.errors import ConfigError

    with pytest.raises(ConfigError, match=r"layer 40 is outside the model's 2 blocks \(0..1"):
        collect_activations(tiny, ["Hello?"], [0, 40])
    with pytest.raises(ConfigError, match="layer -3 is outside"):
        collect_activations(tiny, ["Hello?"], [-3])
    assert collect_activations(tiny, ["Hello?"], [-1]).shape[1] == 1
