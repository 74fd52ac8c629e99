"""The generation engine: batch invariance, seeding, stopping, log-probs, hooks."""

import pytest
import torch

from workbench.errors import ConfigError
from workbench.generation import (
    ForwardHook,
    GenerationConfig,
    generate,
    layer_module_name,
)

PROMPTS = [
    "hi",
    "What is the longest river in Africa?",
    "Tell me about the history of the violin, please, in some detail.",
    "ok?",
    "Who wrote Oliver Twist and when was it published?",
]


def _ids(gens):
    return [(g.prompt_index, g.sample, tuple(g.token_ids)) for g in gens]


def count_prefix_passes(monkeypatch) -> list[int]:
    """The length of every shared prefix the engine encodes from here on (it still encodes it)."""
    import workbench.generation.engine as engine

    encoded: list[int] = []
    real = engine._encode_prefix
    monkeypatch.setattr(
        engine, "_encode_prefix", lambda m, ids: encoded.append(len(ids)) or real(m, ids)
    )
    return encoded


def check_prefix_cache(lm, prompts, samples, message="", **config) -> None:
    """For each count of ``samples`` (sampled when more than one): the same tokens and
    log-probabilities with the prefix cache as without it."""
    for k in samples:
        cfg = GenerationConfig(**config, num_samples=k, do_sample=k > 1, return_logprobs=True)
        cached = generate(lm, prompts, cfg, progress=False)
        plain = generate(
            lm,
            prompts,
            GenerationConfig(**{**cfg.to_dict(), "prefix_cache": False}),
            progress=False,
        )
        assert [g.token_ids for g in cached] == [g.token_ids for g in plain], message
        assert all(
            a == pytest.approx(b, abs=1e-4)
            for g, h in zip(cached, plain)
            for a, b in zip(g.logprobs, h.logprobs)
        )


def test_greedy_output_is_the_same_alone_or_in_any_batch(tiny):
    cfg = GenerationConfig(max_new_tokens=12, batch_size=8)
    together = generate(tiny, PROMPTS, cfg, progress=False)
    for i, p in enumerate(PROMPTS):
        alone = generate(tiny, [p], cfg, progress=False)[0]
        assert alone.token_ids == together[i].token_ids, f"prompt {i} differs in a batch"
    # other batch sizes and orders give the same answers too
    small = generate(
        tiny, PROMPTS, GenerationConfig(max_new_tokens=12, batch_size=2), progress=False
    )
    assert _ids(small) == _ids(together)
    rev = generate(tiny, PROMPTS[::-1], cfg, progress=False)
    assert [g.token_ids for g in rev[::-1]] == [g.token_ids for g in together]


def test_engine_matches_transformers_generate(tiny):
    from workbench.models import render_chat

    cfg = GenerationConfig(max_new_tokens=10)
    ours = generate(tiny, PROMPTS[:3], cfg, progress=False)
    for p, g in zip(PROMPTS[:3], ours):
        enc = tiny.tokenizer(
            render_chat(tiny.tokenizer, p), return_tensors="pt", add_special_tokens=False
        )
        out = tiny.model.generate(
            **enc, max_new_tokens=10, do_sample=False, pad_token_id=tiny.tokenizer.pad_token_id
        )
        assert out[0, enc["input_ids"].shape[1] :].tolist() == g.token_ids


def test_results_come_back_in_prompt_order_with_k_samples(tiny):
    cfg = GenerationConfig(max_new_tokens=4, num_samples=3, do_sample=True, seed=1)
    gens = generate(tiny, PROMPTS, cfg, progress=False)
    assert [(g.prompt_index, g.sample) for g in gens] == [
        (i, s) for i in range(5) for s in range(3)
    ]
    assert all(g.prompt_tokens > 0 for g in gens)


def test_sampling_is_seeded_per_prompt_not_per_batch(tiny):
    cfg = GenerationConfig(max_new_tokens=8, num_samples=3, do_sample=True, seed=7, batch_size=16)
    together = generate(tiny, PROMPTS, cfg, progress=False)
    alone = generate(tiny, [PROMPTS[2]], cfg, progress=False)
    assert [g.token_ids for g in alone] == [g.token_ids for g in together if g.prompt_index == 2]
    # samples differ from each other, and another seed gives other samples
    assert len({tuple(g.token_ids) for g in alone}) > 1
    other = generate(
        tiny, [PROMPTS[2]], GenerationConfig(**{**cfg.to_dict(), "seed": 8}), progress=False
    )
    assert [g.token_ids for g in other] != [g.token_ids for g in alone]


def test_max_new_tokens_and_finish_reasons(tiny):
    gens = generate(tiny, PROMPTS, GenerationConfig(max_new_tokens=5), progress=False)
    for g in gens:
        assert len(g.token_ids) <= 5
        assert g.finish_reason in {"eos", "length"}
        if g.finish_reason == "length":
            assert len(g.token_ids) == 5


def test_eos_ends_a_row_early_while_others_continue(tiny):
    """Force EOS for one prompt via a hook on the logits; the rest must be unaffected."""
    eos = tiny.tokenizer.eos_token_id
    cfg = GenerationConfig(max_new_tokens=6)
    plain = generate(tiny, PROMPTS, cfg, progress=False)

    def force_eos_for_prompt_1(module, args, output, state):
        rows = (state.rows == 1).nonzero().flatten()
        if state.step == 2 and len(rows):
            output.logits[rows, -1, :] = -1e9
            output.logits[rows, -1, eos] = 1e9
        return output

    hooked = generate(
        tiny, PROMPTS, cfg, hooks=[ForwardHook("", force_eos_for_prompt_1)], progress=False
    )
    assert hooked[1].finish_reason == "eos"
    assert hooked[1].token_ids == plain[1].token_ids[:2] + [eos]
    for i in (0, 2, 3, 4):
        assert hooked[i].token_ids == plain[i].token_ids


def test_stop_strings_cut_the_text(tiny):
    plain = generate(tiny, PROMPTS[:2], GenerationConfig(max_new_tokens=12), progress=False)
    # choose a stop string from what the model actually produces
    stop = tiny.tokenizer.decode(plain[1].token_ids[3:5])
    stopped = generate(
        tiny, PROMPTS[:2], GenerationConfig(max_new_tokens=12, stop_strings=(stop,)), progress=False
    )
    assert stopped[1].finish_reason == "stop_string"
    assert stop not in stopped[1].text
    assert len(stopped[1].token_ids) <= 5


def test_stop_when_predicate_ends_samples(tiny):
    gens = generate(
        tiny,
        PROMPTS,
        GenerationConfig(max_new_tokens=12),
        stop_when=lambda text: len(text) >= 3,
        progress=False,
    )
    for g in gens:
        assert g.finish_reason in {"stop_when", "eos", "length"}
        assert len(g.token_ids) < 12 or g.finish_reason != "stop_when"
    assert any(g.finish_reason == "stop_when" for g in gens)


def test_logprobs_match_a_full_forward_pass(tiny):
    from workbench.models import render_chat

    gens = generate(
        tiny, PROMPTS[:2], GenerationConfig(max_new_tokens=6, return_logprobs=True), progress=False
    )
    for p, g in zip(PROMPTS[:2], gens):
        prompt_ids = tiny.tokenizer(render_chat(tiny.tokenizer, p), add_special_tokens=False)[
            "input_ids"
        ]
        full = torch.tensor([prompt_ids + g.token_ids])
        with torch.no_grad():
            logp = torch.log_softmax(tiny.model(full).logits[0].float(), -1)
        n = len(prompt_ids)
        expected = [logp[n - 1 + j, t].item() for j, t in enumerate(g.token_ids)]
        assert g.logprobs == pytest.approx(expected, abs=1e-4)


def test_hooks_see_which_prompt_each_row_belongs_to(tiny):
    seen = []

    def record(module, args, output, state):
        seen.append(
            (
                state.step,
                sorted(state.rows.tolist()),
                output[0].shape[0] if isinstance(output, tuple) else output.shape[0],
            )
        )

    site = layer_module_name(tiny.model, 1)
    assert site == "model.layers.1"
    before = dict(tiny.model.get_submodule(site)._forward_hooks)  # transformers may keep its own
    generate(
        tiny,
        PROMPTS,
        GenerationConfig(max_new_tokens=3, batch_size=2),
        hooks=[ForwardHook(site, record)],
        progress=False,
    )
    prefill = [s for s in seen if s[0] == 0]
    assert sorted(r for _, rows, _ in prefill for r in rows) == list(range(len(PROMPTS)))
    assert all(len(rows) == n for _, rows, n in seen)
    # our hooks are removed afterwards
    assert dict(tiny.model.get_submodule(site)._forward_hooks) == before


def test_a_hook_that_edits_the_residual_stream_changes_the_output(tiny):
    site = layer_module_name(tiny.model, 0)

    def push(module, args, output, state):
        hidden = output[0] if isinstance(output, tuple) else output
        hidden += 5.0
        return output

    cfg = GenerationConfig(max_new_tokens=8)
    plain = generate(tiny, PROMPTS[:2], cfg, progress=False)
    pushed = generate(tiny, PROMPTS[:2], cfg, hooks=[ForwardHook(site, push)], progress=False)
    assert [g.token_ids for g in plain] != [g.token_ids for g in pushed]


@pytest.mark.parametrize(
    "bad",
    [
        {"max_new_tokens": 0},
        {"num_samples": 0},
        {"batch_size": 0},
        {"do_sample": True, "temperature": 0.0},
        {"top_p": 0.0},
    ],
)
def test_bad_generation_settings_are_rejected(bad):
    field = next(iter(bad)) if "temperature" not in bad else "temperature"
    with pytest.raises(ConfigError, match=field):
        GenerationConfig(**bad)


def test_top_p_keeps_only_the_nucleus():
    from workbench.generation.engine import _filter_top_p

    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    kept = _filter_top_p(probs, 0.75)
    assert kept[0, 2:].sum() == 0
    assert kept.sum().item() == pytest.approx(1.0)
    assert kept[0, 0].item() == pytest.approx(0.5 / 0.8)


def test_empty_prompt_list_returns_nothing(tiny):
    assert generate(tiny, [], progress=False) == []


def test_shared_prefix_is_encoded_once_with_identical_outputs(tiny, monkeypatch):
    from workbench.generation.engine import shared_prefix_length

    assert shared_prefix_length([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]) == 2
    assert shared_prefix_length([[1, 2], [1, 2]]) == 1  # one token of each prompt stays
    assert shared_prefix_length([[7, 8, 9]]) == 0
    system = "You answer briefly and never invent facts. " * 3
    example = [
        {"role": "user", "content": "What is a brook?"},
        {"role": "assistant", "content": "A small stream."},
    ]
    prompts = [
        example + [{"role": "user", "content": q}]
        for q in ["What is a lake?", "Tell me about the Nile, please, in some detail", "hi", "Why?"]
    ]
    encoded = count_prefix_passes(monkeypatch)
    check_prefix_cache(tiny, prompts, (1, 3), max_new_tokens=10, system_prompt=system, batch_size=3)
    assert len(encoded) == 2 and encoded[0] > 100  # once per call, the system prompt and example
    # hooks may act on prompt positions: no prefix caching with them
    from workbench.generation import ForwardHook, layer_module_name

    hook = ForwardHook(layer_module_name(tiny.model, 0), lambda m, a, o, s: o)
    generate(
        tiny,
        prompts,
        GenerationConfig(max_new_tokens=2, system_prompt=system),
        hooks=[hook],
        progress=False,
    )
    assert len(encoded) == 2


def test_repass_runs_the_prompt_pass_again_for_chosen_prompts_only(tiny):
    from workbench.generation import ForwardHook, layer_module_name

    prompts = ["What is a river?", "Name a famous brook, please.", "hi", "Why is the sky blue?"]
    cfg = GenerationConfig(max_new_tokens=6, batch_size=3)
    seen = []

    def shift(module, args, output, state):
        h = output[0] if isinstance(output, tuple) else output
        if state.repass:
            seen.append(state.rows.tolist())
            h += 3.0  # the second pass differs: its cache must be the one used
        return output

    hook = ForwardHook(layer_module_name(tiny.model, 0), shift)
    out = generate(
        tiny,
        prompts,
        cfg,
        hooks=[hook],
        repass=lambda rows: [r in (1, 3) for r in rows],
        progress=False,
    )
    plain = generate(tiny, prompts, cfg, progress=False)
    assert sorted(r for rows in seen for r in rows) == [1, 3]
    assert [g.token_ids for g in out][0::2] == [g.token_ids for g in plain][0::2]
    assert any(out[i].token_ids != plain[i].token_ids for i in (1, 3))
