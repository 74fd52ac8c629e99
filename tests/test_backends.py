"""Back ends without a server or vLLM: names, capabilities, checks, the response cache, the
parsing of endpoint responses, and stacked LoRA adapters."""

from __future__ import annotations

import copy
import threading

import pytest
import torch

from workbench.backends import capabilities_of, check_technique, parse_model
from workbench.backends.base import cut_when
from workbench.backends.cache import ResponseCache, request_key
from workbench.backends.openai_api import APIOptions, _generation
from workbench.errors import ConfigError
from workbench.generation import GenerationConfig


def test_model_names_pick_the_back_end():
    assert parse_model("smollm2-135m-instruct").backend == "hf"
    assert parse_model("org/model").backend == "hf"
    ref = parse_model("vllm:meta-llama/Llama-3.1-8B-Instruct")
    assert (ref.backend, ref.target) == ("vllm", "meta-llama/Llama-3.1-8B-Instruct")
    ref = parse_model("openai:my-model@http://127.0.0.1:8000/v1")
    assert (ref.backend, ref.target, ref.base_url) == (
        "openai",
        "my-model",
        "http://127.0.0.1:8000/v1",
    )
    with pytest.raises(ConfigError, match="http"):
        parse_model("openai:m@localhost:8000")
    with pytest.raises(ConfigError, match="names no model"):
        parse_model("vllm:")


@pytest.mark.parametrize(
    "model, technique, needs, ok",
    [
        ("smollm2-135m-instruct", "steering", {"steering"}, True),
        ("vllm:x", "sft", {"weights"}, True),
        ("vllm:x", "steering", {"steering"}, True),
        ("vllm:x", "editing", {"activations"}, False),
        ("openai:gpt-4o", "steering", {"steering"}, False),
        ("openai:gpt-4o", "zero_shot", set(), True),
        ("openai:gpt-4o", "sft", {"weights"}, False),
    ],
)
def test_techniques_are_checked_against_capabilities(model, technique, needs, ok):
    if ok:
        check_technique(model, technique, frozenset(needs))
    else:
        with pytest.raises(ConfigError, match=technique):
            check_technique(model, technique, frozenset(needs))


def test_registered_techniques_declare_what_they_need():
    from workbench.techniques import TECHNIQUES

    assert TECHNIQUES["steering"].requires == {"steering"}
    assert TECHNIQUES["sft"].requires == TECHNIQUES["sft_dpo"].requires == {"weights"}
    for name in ("base", "zero_shot", "few_shot_cot"):
        assert not TECHNIQUES[name].requires
        assert not capabilities_of("openai:gpt-4o").missing(TECHNIQUES[name].requires)


def test_the_cache_key_covers_the_request_not_the_credentials(tmp_path):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.0}
    assert request_key("http://a/v1", body) == request_key(
        "http://a/v1/", dict(reversed(body.items()))
    )
    assert request_key("http://a/v1", body) != request_key("http://b/v1", body)
    assert request_key("http://a/v1", body) != request_key("http://a/v1", {**body, "seed": 1})
    cache = ResponseCache(tmp_path / "c.sqlite")
    key = request_key("http://a/v1", body)

    def put(i):
        cache.put(f"{key}-{i}", {"choices": [{"text": str(i)}]})

    threads = [threading.Thread(target=put, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 16 and cache.get(f"{key}-3") == {"choices": [{"text": "3"}]}
    assert cache.get("missing") is None
    cache.close()
    assert ResponseCache(tmp_path / "c.sqlite").get(f"{key}-15") is not None  # durable


def test_cut_when_finds_the_first_prefix_the_predicate_accepts():
    pieces = ["I", " can", "'t", " help", " with", " that", "."]
    assert cut_when(pieces, "".join, lambda t: "help" in t) == 4
    assert cut_when(pieces, "".join, lambda t: "never" in t) is None


def _chat_response(content, tokens, finish="stop", usage=(10, 5)):
    return {
        "choices": [
            {
                "message": {"content": content},
                "finish_reason": finish,
                "logprobs": {"content": [{"token": t, "logprob": -0.5} for t in tokens]},
            }
        ],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
    }


def test_endpoint_responses_become_generations():
    cfg = GenerationConfig(return_logprobs=True)
    o = APIOptions(price_in=2.0, price_out=8.0)
    g = _generation(0, 1, _chat_response(" Paris. ", [" Paris", "."]), False, cfg, None, o)
    assert (g.text, g.sample, g.finish_reason, g.logprobs) == ("Paris.", 1, "eos", [-0.5, -0.5])
    assert (g.prompt_tokens, g.completion_tokens, g.num_tokens) == (10, 5, 5)
    assert g.cost == pytest.approx((10 * 2.0 + 5 * 8.0) / 1e6) and g.cached is False
    completion = {
        "choices": [
            {
                "text": "a, b",
                "finish_reason": "stop",
                "stop_reason": "\n",
                "logprobs": {"tokens": ["a", ",", " b"], "token_logprobs": [-1.0, -2.0, -3.0]},
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 3},
    }
    g = _generation(2, 0, completion, True, cfg, None, APIOptions())
    assert (g.text, g.finish_reason, g.cost, g.cached) == ("a, b", "stop_string", None, True)
    tokens = [" I", " can", "'t", " help", " you", " with", " that"]
    g = _generation(
        0,
        0,
        _chat_response("I can't help you with that", tokens, "length", (4, 7)),
        False,
        cfg,
        lambda t: "help" in t,
        o,
    )
    assert (g.text, g.finish_reason, g.completion_tokens) == ("I can't help", "stop_when", 4)
    assert g.logprobs == [-0.5] * 4


def test_stacked_adapters_equal_the_two_applied_in_turn(tmp_path):
    """SFT+DPO's pair as one LoRA of rank r1 + r2: the same model as merging both in turn."""
    from peft import LoraConfig, PeftModel, get_peft_model

    from workbench.finetuning.lora import lora_target_modules
    from workbench.finetuning.stack import stack_adapters
    from workbench.techniques.finetune import _apply_adapter
    from workbench.testing import tiny_lm

    lm = tiny_lm(seed=0)
    dirs = []
    base = lm.model
    for i, (rank, rslora) in enumerate(((4, False), (2, True))):
        torch.manual_seed(i)
        peft = get_peft_model(
            copy.deepcopy(base),
            LoraConfig(
                r=rank,
                lora_alpha=3 * rank,
                use_rslora=rslora,
                init_lora_weights=False,
                target_modules=lora_target_modules(base) if i == 0 else ["q_proj", "v_proj"],
            ),
        )
        peft.save_pretrained(str(tmp_path / f"a{i}"))
        dirs.append(tmp_path / f"a{i}")
        base = _apply_adapter(copy.deepcopy(base), dirs[-1])
    stacked = stack_adapters(dirs, tmp_path / "stacked")
    assert stack_adapters(dirs, tmp_path / "stacked") == stacked  # written once
    served = PeftModel.from_pretrained(copy.deepcopy(lm.model), str(stacked)).eval()
    ids = torch.tensor([[5, 9, 17, 33, 2]])
    with torch.no_grad():
        assert torch.allclose(served(ids).logits, base.eval()(ids).logits, atol=1e-5)
        assert not torch.allclose(lm.model(ids).logits, base(ids).logits, atol=1e-3)


@pytest.mark.parametrize(
    "length, chunked, budget, added",
    [
        (2048, None, None, {"enable_chunked_prefill": False, "max_num_batched_tokens": 4096}),
        (8192, None, None, {"enable_chunked_prefill": False, "max_num_batched_tokens": 8192}),
        (2048, None, 2048, {"enable_chunked_prefill": False}),  # the user's budget holds a prompt
        (2048, None, 64, {}),  # a step shorter than the model: the user wants chunks
        (2048, True, None, {}),
        (2048, False, None, {}),
    ],
)
def test_cpu_engines_and_servers_prefill_whole_prompts_unless_the_user_decides(
    length, chunked, budget, added
):
    """One rule for the engine's options and the server's flags: vLLM's CPU build stops the
    engine when a sampled prompt is prefilled in chunks."""
    from workbench.backends.serve import as_flags, given_chunking
    from workbench.backends.vllm_engine import cpu_whole_prompts

    assert cpu_whole_prompts(length, chunked, budget) == added
    user = {
        **({} if chunked is None else {"enable_chunked_prefill": chunked}),
        **({} if budget is None else {"max_num_batched_tokens": budget}),
    }
    # the server reads the user's flags back to the same choice, so it adds the same settings
    assert given_chunking(as_flags(user)) == (chunked, budget)
    assert as_flags(cpu_whole_prompts(length, *given_chunking(as_flags(user)))) == as_flags(added)


def test_a_servers_chunking_flags_are_read_in_every_spelling():
    from workbench.backends.serve import given_chunking

    assert given_chunking(["--max-num-batched-tokens=512", "--port", "1"]) == (None, 512)
    assert given_chunking(["--max_num_batched_tokens", "512"]) == (None, 512)
    assert given_chunking(["--enable-chunked-prefill"]) == (True, None)
    assert given_chunking(["--enable-chunked-prefill=false"]) == (False, None)
    assert given_chunking(["--no-enable-chunked-prefill"]) == (False, None)
    with pytest.raises(ConfigError, match="whole number of tokens, not 'lots'"):
        given_chunking(["--max-num-batched-tokens", "lots"])
    with pytest.raises(ConfigError, match="not ''"):
        given_chunking(["--max-num-batched-tokens"])
