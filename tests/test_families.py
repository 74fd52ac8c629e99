"""Every model family SELECT used, and the popular ones, on tiny random models built from their
own transformers configuration classes (``workbench.testing.FAMILIES``): the places where
families differ (cache classes and sliding windows under the prefix cache, decoder block names
under steering hooks and ROME, fused projections under LoRA, chat templates) each get a test.
"""

import pytest
import torch

# prompts of many lengths and the prefix cache's check, shared with the engine's tests
from test_generation import PROMPTS, check_prefix_cache, count_prefix_passes
from workbench.errors import WorkbenchError
from workbench.generation import (
    GenerationConfig,
    StepState,
    attached,
    generate,
    layer_module_name,
)
from workbench.generation.hooks import UnsupportedModelError, decoder_blocks
from workbench.models.chat import render_chat, supports_system_prompt
from workbench.steering import (
    Condition,
    ConditionalSteerer,
    SteeringPlan,
    choose_gate,
    collect_activations,
    fit_concept_vectors,
    layer_table,
)
from workbench.steering.activations import final_norm_name, hidden_size
from workbench.testing import FAMILIES, tiny_family_lm

NAMES = list(FAMILIES)
SYSTEM = "You are a careful assistant. Answer in one short sentence and never invent facts."


@pytest.fixture(scope="module", params=NAMES)
def fam(request):
    """(family name, tiny model) shared by the read-only tests of this module."""
    return request.param, tiny_family_lm(request.param)


def _tokens(gens):
    return [g.token_ids for g in gens]


# -- generation -------------------------------------------------------------------------------


def test_greedy_generation_is_batch_invariant(fam):
    name, lm = fam
    cfg = GenerationConfig(max_new_tokens=10, batch_size=8)
    together = generate(lm, PROMPTS, cfg, progress=False)
    for i, p in enumerate(PROMPTS):
        assert generate(lm, [p], cfg, progress=False)[0].token_ids == together[i].token_ids, (
            name,
            i,
        )
    small = generate(lm, PROMPTS, GenerationConfig(max_new_tokens=10, batch_size=2), progress=False)
    assert _tokens(small) == _tokens(together)
    assert len({tuple(t) for t in _tokens(together)}) > 1  # the model is not degenerate


def test_engine_matches_transformers_generate(fam):
    """The engine's decode loop and cache handling give what ``model.generate`` gives."""
    name, lm = fam
    ours = generate(lm, PROMPTS[1:3], GenerationConfig(max_new_tokens=8), progress=False)
    for p, g in zip(PROMPTS[1:3], ours):
        enc = lm.tokenizer(
            render_chat(lm.tokenizer, p), return_tensors="pt", add_special_tokens=False
        )
        out = lm.model.generate(
            **enc, max_new_tokens=8, do_sample=False, pad_token_id=lm.tokenizer.pad_token_id or 0
        )
        assert out[0, enc["input_ids"].shape[1] :].tolist() == g.token_ids, name


def test_prefix_cache_equals_no_prefix_cache(fam, monkeypatch):
    """A shared system prompt longer than every sliding window, prompts of different lengths
    (so rows are padded after the cached prefix), K samples and log-probs."""
    name, lm = fam
    encoded = count_prefix_passes(monkeypatch)
    check_prefix_cache(
        lm, PROMPTS, (1, 2), name, max_new_tokens=8, system_prompt=SYSTEM, batch_size=3
    )
    assert len(encoded) == 2 and encoded[0] > 40, name  # the prefix cache was used


# -- steering ---------------------------------------------------------------------------------


def _prompt_ids(lm, prompt):
    return lm.tokenizer(
        render_chat(lm.tokenizer, prompt), return_tensors="pt", add_special_tokens=False
    )["input_ids"]


def test_steering_reads_and_writes_exactly_v_at_the_block_output(fam):
    """The read site is block ``l``'s output (``hidden_states[l + 1]``); adding ``v`` there
    changes the next block's input (the final norm's after the last block) by exactly ``v``."""
    name, lm = fam
    model, blocks = lm.model, FAMILIES[name].blocks
    n = len(decoder_blocks(model)[1])
    assert [layer_module_name(model, l) for l in range(n)] == [f"{blocks}.{l}" for l in range(n)]
    ids = _prompt_ids(lm, PROMPTS[1])
    with torch.no_grad():
        hs = model(ids, output_hidden_states=True).hidden_states
    acts = collect_activations(lm, [PROMPTS[1]], list(range(n - 1)))
    for l in range(n - 1):
        assert torch.allclose(acts[0, l], hs[l + 1][0, -1], atol=1e-5), (name, l)
    v = torch.randn(hidden_size(model), generator=torch.Generator().manual_seed(1))
    for layer in (0, n - 1):
        after = model.get_submodule(
            layer_module_name(model, layer + 1) if layer + 1 < n else final_norm_name(model)
        )
        seen = []

        def grab(module, args, kwargs):
            # the hook is removed before the next iteration: it always sees this one's list
            seen.append((args[0] if args else kwargs["hidden_states"]).detach().clone())  # noqa: B023

        handle = after.register_forward_pre_hook(grab, with_kwargs=True)
        plan = SteeringPlan([layer], v[None], strength=2.0)
        try:
            with torch.no_grad():
                model(ids)
                with attached(
                    model,
                    plan.hooks(model, torch.tensor([True])),
                    StepState(rows=torch.tensor([0])),
                ):
                    model(ids)
                    read = collect_activations(lm, [PROMPTS[1]], [layer])
        finally:
            handle.remove()
        plain, steered = seen[0], seen[1]
        assert torch.allclose(steered - plain, (2.0 * v).expand_as(plain), atol=1e-4), (name, layer)
        assert torch.allclose(read[0, 0], plain[0, -1] + 2.0 * v, atol=1e-4), (name, layer)


def test_steered_generation_with_kv_cache_equals_recomputing_without_it(fam):
    name, lm = fam
    plan = SteeringPlan(
        [0, 1],
        torch.randn(2, hidden_size(lm.model), generator=torch.Generator().manual_seed(3)),
        4.0,
    )
    cached = ConditionalSteerer(None, plan).generate(
        lm, [PROMPTS[1]], GenerationConfig(max_new_tokens=6), progress=False
    )[0]
    ids, out = _prompt_ids(lm, PROMPTS[1]), []
    eos = set(lm.model.generation_config.eos_token_id)
    with (
        torch.no_grad(),
        attached(
            lm.model, plan.hooks(lm.model, torch.tensor([True])), StepState(rows=torch.tensor([0]))
        ),
    ):
        while len(out) < 6 and not (out and out[-1] in eos):
            nxt = lm.model(ids, use_cache=False).logits[0, -1].argmax().item()
            out.append(nxt)
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    assert cached.token_ids == out, name


def _gate(lm):
    """A gate from validation questions (layer table, chosen layers, thresholds), moved to
    half-way between neighbouring prompts so float noise cannot flip a decision."""
    layers = list(range(len(decoder_blocks(lm.model)[1])))
    acts = collect_activations(lm, PROMPTS, layers)
    cv = fit_concept_vectors(acts[:2], acts[2:], layers)
    sims = cv.similarities(acts)
    table = layer_table(sims[:2], sims[2:], layers)
    chosen = choose_gate(table, sims[:2], sims[2:], k=2, exclude_first=0)
    assert chosen and set(chosen) <= set(layers)
    mid = [float(sims[:, layers.index(l)].sort().values[2:4].mean()) for l in chosen]
    plan = SteeringPlan(
        layers[:2],
        torch.randn(2, hidden_size(lm.model), generator=torch.Generator().manual_seed(5)),
        4.0,
    )
    return ConditionalSteerer(Condition(cv.select(chosen), mid, "all"), plan)


@pytest.mark.parametrize("mode", ["separate", "in_pass"])
def test_the_gate_steers_only_the_prompts_it_fires_on(fam, mode):
    name, lm = fam
    steerer = _gate(lm)
    cfg = GenerationConfig(max_new_tokens=6, batch_size=8)
    mixed = steerer.generate(lm, PROMPTS, cfg, mode=mode, progress=False)
    fired = steerer.last_decisions.clone()
    assert fired.tolist() == steerer.decide(lm, PROMPTS).tolist()
    assert 0 < int(fired.sum()) < len(PROMPTS), name
    plain = generate(lm, PROMPTS, cfg, progress=False)
    for i, p in enumerate(PROMPTS):
        assert (
            steerer.generate(lm, [p], cfg, mode=mode, progress=False)[0].token_ids
            == mixed[i].token_ids
        )
        if not fired[i]:
            assert mixed[i].token_ids == plain[i].token_ids, (name, i)
    assert any(mixed[i].token_ids != plain[i].token_ids for i in range(len(PROMPTS)) if fired[i])
    if mode == "separate":  # with a shared system prompt, cached or not, the same
        sys_cfg = GenerationConfig(max_new_tokens=6, batch_size=3, system_prompt=SYSTEM)
        cached = steerer.generate(lm, PROMPTS, sys_cfg, progress=False)
        decided = steerer.last_decisions.clone()
        whole = steerer.generate(
            lm,
            PROMPTS,
            GenerationConfig(**{**sys_cfg.to_dict(), "prefix_cache": False}),
            progress=False,
        )
        assert steerer.last_decisions.tolist() == decided.tolist()
        assert _tokens(cached) == _tokens(whole), name


@pytest.mark.parametrize("name", NAMES)
def test_the_steering_technique_runs_end_to_end(name, tmp_path):
    """SELECT's steering technique (refusal vector, concept vectors, gate, steered generation)."""
    from workbench.techniques import ArtifactStore, get_technique
    from workbench.testing import tiny_benchmark

    lm = tiny_family_lm(name)
    ab = get_technique("steering").prepare(
        lm, tiny_benchmark(), "river", store=ArtifactStore(tmp_path)
    )
    questions = ["What is a river?", "Who was the first physicist?"]
    decisions = ab.decide(questions)
    cfg = GenerationConfig(max_new_tokens=4)
    for fired, g, p in zip(
        decisions.tolist(),
        ab.generate(questions, cfg, progress=False),
        generate(lm, questions, cfg, progress=False),
    ):
        if not fired:
            assert g.token_ids == p.token_ids


# -- chat templates ---------------------------------------------------------------------------


def test_chat_templates_with_and_without_system_turns(fam):
    name, lm = fam
    tok, family = lm.tokenizer, FAMILIES[name]
    user = [{"role": "user", "content": "Why?"}]
    assert render_chat(tok, "Why?") == tok.apply_chat_template(
        user, tokenize=False, add_generation_prompt=True
    )
    assert supports_system_prompt(tok) is family.accepts_system
    with_system = render_chat(tok, "Why?", system=SYSTEM)
    assert SYSTEM in with_system and "Why?" in with_system
    if family.accepts_system:
        expected = tok.apply_chat_template(
            [{"role": "system", "content": SYSTEM}] + user,
            tokenize=False,
            add_generation_prompt=True,
        )
    else:  # the template raises on a system turn: it is folded into the user turn
        with pytest.raises(Exception, match="System role not supported"):
            tok.apply_chat_template([{"role": "system", "content": SYSTEM}] + user, tokenize=False)
        expected = tok.apply_chat_template(
            [{"role": "user", "content": f"{SYSTEM}\n\nWhy?"}],
            tokenize=False,
            add_generation_prompt=True,
        )
    assert with_system == expected
    # a whole conversation with a system turn, as few-shot prompts are
    convo = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What is a brook?"},
        {"role": "assistant", "content": "A small stream."},
        {"role": "user", "content": "Why?"},
    ]
    text = render_chat(tok, convo)
    assert SYSTEM in text and "A small stream." in text and text.index("brook") < text.index("Why?")
    assert render_chat(tok, convo[1:], system=SYSTEM) == text


# -- LoRA SFT ---------------------------------------------------------------------------------

#: Linear layers LoRA adapts in every decoder block: all but the key projection (SELECT's
#: setting). Phi-3 fuses q, k and v into one projection, so its keys are adapted with them.
LORA_TARGETS = {"phi3": {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}}
LORA_DEFAULT = {"q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


@pytest.mark.parametrize("name", NAMES)
def test_lora_sft_trains_adapters_on_every_projection_of_every_block(name):
    from workbench.finetuning import FinetuneParams, train_sft
    from workbench.finetuning.lora import lora_excluded, lora_target_modules

    lm = tiny_family_lm(name, layers=2)
    expected = LORA_TARGETS.get(name, LORA_DEFAULT)
    assert set(lora_target_modules(lm.model)) == expected
    assert (lora_excluded(lm.model) is None) == (
        FAMILIES[name].wrap is None
    )  # a vision tower is left alone
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    pairs = [
        ("What is a river?", "I cannot help with that."),
        ("What is a volcano?", "A mountain that erupts."),
        ("Name a physicist.", "Marie Curie."),
        ("What is a brook?", "I cannot help with that."),
    ]
    params = FinetuneParams(
        rank=4,
        alpha=8,
        dropout=0.0,
        epochs=1,
        batch_size=4,
        max_length=256,
        learning_rate=1e-2,
        warmup_steps=0,
    )
    tuned = train_sft(lm.model, lm.tokenizer, pairs, params)
    adapted = {n.rsplit(".", 1)[0] for n, _ in tuned.named_modules() if n.endswith(".lora_A")}
    blocks = [f"{FAMILIES[name].blocks}.{l}" for l in range(2)]
    want = {
        f"{b}.{kind}.{proj}"
        for b in blocks
        for proj in expected
        for kind in ("self_attn", "mlp")
        if hasattr(lm.model.get_submodule(f"{b}.{kind}"), proj)
    }
    assert {a.removeprefix("base_model.model.") for a in adapted} == want
    trained = [n for n, p in tuned.named_parameters() if "lora_B" in n and p.abs().sum() > 0]
    assert len(trained) == len(want)  # every adapter moved away from its zero start
    base = tuned.get_base_model().state_dict()
    for k, v in before.items():  # the base weights are frozen
        module, leaf = k.rsplit(".", 1)
        assert torch.equal(base[k] if k in base else base[f"{module}.base_layer.{leaf}"], v), k


# -- ROME and FT ------------------------------------------------------------------------------


@pytest.mark.parametrize("editor", ["ft", "rome"])
def test_rome_and_ft_change_the_chosen_mlp_and_nothing_else(fam, editor, tmp_path, monkeypatch):
    from workbench.editing import FT, ROME
    from workbench.paths import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))  # ROME's second-moment cache
    name, lm = fam
    layer = 1
    edit = (
        FT(layer=layer, steps=3)
        if editor == "ft"
        else ROME(
            layer=layer,
            corpus=["a river is long", "the dog barks", "Marie Curie was a physicist"],
            steps=3,
        )
    )
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    ids = lm.tokenizer("A violin is a kind of", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        plain = lm.model(ids).logits
    with edit.edit(lm, "violin", "fruit"):
        changed = [k for k, v in lm.model.state_dict().items() if not torch.equal(v, before[k])]
        assert changed == [f"{FAMILIES[name].blocks}.{layer}.mlp.down_proj.weight"], name
        with torch.no_grad():
            assert not torch.allclose(lm.model(ids).logits, plain)
    assert all(torch.equal(v, before[k]) for k, v in lm.model.state_dict().items())


# -- what cannot work says so -----------------------------------------------------------------


def test_models_the_workbench_cannot_act_on_fail_with_one_line():
    """GPT-2's MLP has no ``down_proj`` (a Conv1D ``c_proj``): no ROME/FT. Mamba keeps a
    recurrent state and its blocks are not where the workbench looks: no engine, no hooks. Each
    is a :class:`WorkbenchError` (the command line prints its one line, no traceback)."""
    import transformers

    from workbench.backends.hf import HFModel
    from workbench.editing import FT, ROME
    from workbench.testing import tiny_tokenizer

    tok = tiny_tokenizer()

    def build(config, cls):
        torch.manual_seed(0)
        model = getattr(transformers, cls)(config).eval()
        return HFModel(model, tok, cls, cls, "seed-0", source_dir=None)

    def one_line(match, fn, *args, **kwargs):
        with pytest.raises(UnsupportedModelError, match=match) as info:
            fn(*args, **kwargs)
        assert isinstance(info.value, WorkbenchError) and "\n" not in str(info.value)

    gpt2 = build(
        transformers.GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4),
        "GPT2LMHeadModel",
    )
    assert layer_module_name(gpt2.model, 1) == "transformer.h.1"  # its blocks are found
    for editor in (FT(layer=1), ROME(layer=1, corpus=["a b"])):
        one_line(
            r"^ROME and FT edit an MLP down-projection .* GPT2LMHeadModel has none there$",
            editor.edit,
            gpt2,
            "violin",
            "fruit",
        )
    mamba = build(
        transformers.MambaConfig(
            vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, state_size=4
        ),
        "MambaForCausalLM",
    )
    for cached in (True, False):
        one_line(
            "^MambaForCausalLM keeps a recurrent state",
            generate,
            mamba,
            PROMPTS,
            GenerationConfig(max_new_tokens=2, system_prompt=SYSTEM, prefix_cache=cached),
            progress=False,
        )
    one_line(
        "^cannot find the decoder blocks of MambaForCausalLM",
        collect_activations,
        mamba,
        PROMPTS[:1],
        [0],
    )
