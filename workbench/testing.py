"""Tiny, randomly initialised chat models for fast tests (no download, a few MB of RAM).

``tiny_lm()`` builds a 2-layer Llama with a byte-level tokenizer and a ChatML chat template, the
same architecture family and prompt format as the embedded SmolLM2, so code paths (hooks, LoRA
targets, chat rendering) match while a forward pass takes microseconds.
"""

from __future__ import annotations

from pathlib import Path

import torch

from workbench.models.loading import LoadedModel

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

#: A template that rejects system turns, as Gemma's does.
NO_SYSTEM_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{{ '<start_of_turn>' + message['role'] + '\n' + message['content'] + '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def tiny_tokenizer(chat_template: str | None = CHATML_TEMPLATE):
    """A byte-level BPE tokenizer with no merges: every byte is a token, decoding is exact."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in sorted(alphabet):
        vocab[ch] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tok.chat_template = chat_template
    tok.padding_side = "left"
    return tok


def tiny_lm(seed: int = 0, layers: int = 2, hidden: int = 32, chat_template: str | None = CHATML_TEMPLATE,
            dtype: torch.dtype = torch.float32) -> LoadedModel:
    """A tiny random Llama chat model wrapped as a :class:`LoadedModel`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tiny_tokenizer(chat_template)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=None,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
        initializer_range=0.4,  # large enough that greedy outputs vary from step to step
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(dtype).eval()
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return LoadedModel(model=model, tokenizer=tok, name=f"tiny-llama-{seed}",
                       model_id=f"tiny-llama-{seed}", revision=f"seed-{seed}",
                       source_dir=Path("."))


def save_tiny(lm: LoadedModel, directory: Path) -> Path:
    """Save a tiny model as a plain Hugging Face model directory."""
    lm.model.save_pretrained(directory)
    lm.tokenizer.save_pretrained(directory)
    return directory


def tiny_benchmark():
    """A hand-built benchmark (12 atomic concepts, a few compositions) with template questions."""
    from workbench.taxonomy.benchmark import Benchmark
    from workbench.taxonomy.compositions import (
        CompositionParams,
        RelationTemplate,
        SlotRule,
        compose,
    )
    from workbench.taxonomy.model import Concept, Taxonomy
    from workbench.taxonomy.questions import (
        TemplateQuestionGenerator,
        build_question_bank,
    )

    c = [
        Concept("places", "places"), Concept("water", "body of water", parent="places"),
        Concept("river", "river", parent="water"), Concept("brook", "brook", parent="water"),
        Concept("nile", "Nile", kind="instance", parent="river"),
        Concept("danube", "Danube", kind="instance", parent="river"),
        Concept("mountain", "mountain", parent="places"), Concept("volcano", "volcano", parent="mountain"),
        Concept("people", "people"), Concept("scientist", "scientist", parent="people"),
        Concept("physicist", "physicist", parent="scientist"),
        Concept("chemist", "chemist", parent="scientist"),
    ]
    atomic = Taxonomy.from_concepts(c, name="tiny-atomic")
    comps = compose(atomic, [RelationTemplate("{} near {}", (SlotRule("mountain"), SlotRule("water")))],
                    CompositionParams(branching=(4,), max_depth=3))
    gen = TemplateQuestionGenerator(seed=0)
    questions = build_question_bank(atomic, gen).merge(build_question_bank(comps, gen))
    return Benchmark(atomic, comps, questions, {"name": "tiny"})


def register_test_techniques() -> None:
    """Register ``sleepy``: the unmodified model after a pause in ``prepare`` (``seconds``), so
    tests can interrupt a cell while it runs. Ray workers get it with ``imports=("workbench.testing",)``."""
    import time
    from dataclasses import dataclass

    from workbench.techniques.base import TECHNIQUES, Params, register
    from workbench.techniques.base_model import Base, BaseAbstainer

    if "sleepy" in TECHNIQUES:
        return

    @dataclass(frozen=True)
    class SleepyParams(Params):
        seconds: float = 1.0

    @register
    class Sleepy(Base):
        name = "sleepy"
        Params = SleepyParams

        def build(self, lm, bench, data, directory, *, seed, progress):
            time.sleep(self.params.seconds)
            return BaseAbstainer(lm, data.target)


register_test_techniques()
