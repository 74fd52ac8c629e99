"""Tiny, randomly initialised chat models for fast tests (no download, a few MB of RAM).

``tiny_lm()`` builds a 2-layer Llama with a byte-level tokenizer and a ChatML chat template, the
same architecture family and prompt format as the embedded SmolLM2, so code paths (hooks, LoRA
targets, chat rendering) match while a forward pass takes microseconds. ``tiny_family_lm(name)``
builds the same from another family's own configuration class (:data:`FAMILIES`: Llama-3,
Gemma-2, Gemma-3 text-only and image-text, Mistral, Qwen2, Qwen3, Phi-3) with that family's
special tokens and chat template.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

from workbench.backends.hf import HFModel

if TYPE_CHECKING:
    from workbench.generation.backend import Backend
    from workbench.taxonomy.benchmark import Benchmark

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


def tiny_tokenizer(
    chat_template: str | None = CHATML_TEMPLATE,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
    eos: str = "<|im_end|>",
    pad: str | None = "<|endoftext|>",
    bos: str | None = None,
    add_bos: bool = False,
):
    """A byte-level BPE tokenizer with no merges: every byte is a token, decoding is exact.

    ``special_tokens`` come first in the vocabulary and are never split; ``add_bos`` prepends
    ``bos`` when tokenizing with special tokens (as Llama's, Gemma's and Mistral's do).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {tok: i for i, tok in enumerate(special_tokens)}
    for ch in sorted(alphabet):
        vocab[ch] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    if add_bos:
        assert bos is not None  # add_bos prepends bos: every caller passes one
        backend.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, vocab[bos])]
        )
    named = {"eos_token": eos, "pad_token": pad, "bos_token": bos}
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        **{k: v for k, v in named.items() if v is not None},
        additional_special_tokens=[t for t in special_tokens if t not in named.values()],
    )
    tok.chat_template = chat_template
    tok.padding_side = "left"
    return tok


def tiny_lm(
    seed: int = 0,
    layers: int = 2,
    hidden: int = 32,
    chat_template: str | None = CHATML_TEMPLATE,
    dtype: torch.dtype = torch.float32,
) -> HFModel:
    """A tiny random Llama chat model wrapped as a :class:`HFModel`."""
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
    # transformers wraps Module.to with functools.wraps, whose stub takes the bound model for
    # the first argument
    model = LlamaForCausalLM(config).to(dtype).eval()  # type: ignore[arg-type]
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return HFModel(
        model=model,
        tokenizer=tok,
        name=f"tiny-llama-{seed}",
        model_id=f"tiny-llama-{seed}",
        revision=f"seed-{seed}",
        source_dir=Path("."),
    )


LLAMA3_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] | trim %}"
    "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = '' %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\n\n' }}"
    "{{- 'Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n' }}"
    "{{- system_message }}{{- '<|eot_id|>' }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}"
)

#: Gemma-2's template: a system turn is an error.
GEMMA2_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)

#: Gemma-3's template: the system turn is written at the start of the first user turn.
GEMMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif -%}"
    "{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)

#: Mistral-7B-Instruct-v0.3's template: the system prompt joins the last user turn.
MISTRAL_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}"
    "{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}"
    "{{- bos_token }}"
    "{%- for message in loop_messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif %}"
    "{%- if message['role'] == 'user' %}"
    "{%- if loop.last and system_message is defined %}{{- '[INST] ' + system_message + '\n\n' + message['content'] + '[/INST]' }}"
    "{%- else %}{{- '[INST] ' + message['content'] + '[/INST]' }}{%- endif %}"
    "{%- elif message['role'] == 'assistant' %}{{- ' ' + message['content'] + eos_token }}"
    "{%- else %}{{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}"
    "{%- endif %}{%- endfor %}"
)

#: Qwen2.5's template: a default system prompt when none is given.
QWEN2_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}"
    "{%- else %}{{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)

#: Qwen3's template: no default system prompt; ``enable_thinking=False`` writes an empty thought.
QWEN3_TEMPLATE = (
    "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}"
    "{%- endif %}"
)

#: Phi-3.5-mini-instruct's template (an empty system turn is dropped; eos after a finished chat).
PHI3_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
)


def _gemma3_image_text(text, tok):
    """Gemma-3 4B-27B as ``AutoModelForCausalLM`` loads them: the text model inside an image-text
    model with a (tiny) SigLIP vision tower."""
    from transformers import Gemma3Config

    vision = dict(
        model_type="siglip_vision_model",
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=16,
        patch_size=8,
    )
    ids = tok.convert_tokens_to_ids
    return Gemma3Config(
        text_config=text.to_dict(),
        vision_config=vision,
        mm_tokens_per_image=4,
        boi_token_index=ids("<start_of_image>"),
        eoi_token_index=ids("<end_of_image>"),
        image_token_index=ids("<image_soft_token>"),
        tie_word_embeddings=False,
        initializer_range=text.initializer_range,
    )


@dataclass(frozen=True)
class Family:
    """A model family as the workbench meets it: its transformers classes, the settings in which
    it differs from Llama, and its tokenizer's special tokens and chat template.

    ``generation_eos`` are the extra end-of-turn tokens of its ``generation_config``;
    ``accepts_system`` whether its template renders a system turn.
    """

    name: str
    config_class: str
    model_class: str
    template: str
    special_tokens: tuple[str, ...]
    eos: str
    pad: str | None
    bos: str | None = None
    add_bos: bool = False
    generation_eos: tuple[str, ...] = ()
    accepts_system: bool = True
    config: dict = field(default_factory=dict)
    #: ``wrap(text_config, tokenizer) -> config`` for image-text models built around the text model
    wrap: Callable | None = None
    #: where the decoder blocks are
    blocks: str = "model.layers"


#: Tiny stand-ins for the families SELECT used and the popular ones. Sliding windows are
#: shrunk to 32 tokens, shorter than a test prompt with a system prompt. Gemma's output head is
#: untied: Gemma scales embeddings by sqrt(hidden), so with random tied weights a token's own
#: embedding dominates the logits and greedy decoding repeats one token.
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "llama3",
            "LlamaConfig",
            "LlamaForCausalLM",
            LLAMA3_TEMPLATE,
            (
                "<|begin_of_text|>",
                "<|end_of_text|>",
                "<|start_header_id|>",
                "<|end_header_id|>",
                "<|eot_id|>",
                "<|finetune_right_pad_id|>",
            ),
            eos="<|eot_id|>",
            pad="<|finetune_right_pad_id|>",
            bos="<|begin_of_text|>",
            add_bos=True,
            generation_eos=("<|end_of_text|>",),
            config=dict(
                rope_parameters={
                    "rope_type": "llama3",
                    "rope_theta": 500000.0,
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 256,
                },
                tie_word_embeddings=False,
            ),
        ),
        Family(
            "gemma2",
            "Gemma2Config",
            "Gemma2ForCausalLM",
            GEMMA2_TEMPLATE,
            ("<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"),
            eos="<eos>",
            pad="<pad>",
            bos="<bos>",
            add_bos=True,
            generation_eos=("<end_of_turn>",),
            accepts_system=False,
            config=dict(
                head_dim=16,
                query_pre_attn_scalar=16,
                sliding_window=32,
                tie_word_embeddings=False,
                attn_logit_softcapping=50.0,
                final_logit_softcapping=30.0,
                hidden_activation="gelu_pytorch_tanh",
            ),
        ),
        Family(
            "gemma3",
            "Gemma3TextConfig",
            "Gemma3ForCausalLM",
            GEMMA3_TEMPLATE,
            ("<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"),
            eos="<eos>",
            pad="<pad>",
            bos="<bos>",
            add_bos=True,
            generation_eos=("<end_of_turn>",),
            config=dict(
                head_dim=16,
                query_pre_attn_scalar=16,
                sliding_window=32,
                tie_word_embeddings=False,
                sliding_window_pattern=2,
            ),
        ),  # 5 of every 6 layers slide in Gemma-3
        Family(
            "gemma3-mm",
            "Gemma3TextConfig",
            "Gemma3ForConditionalGeneration",
            GEMMA3_TEMPLATE,
            (
                "<pad>",
                "<eos>",
                "<bos>",
                "<start_of_turn>",
                "<end_of_turn>",
                "<start_of_image>",
                "<end_of_image>",
                "<image_soft_token>",
            ),
            eos="<eos>",
            pad="<pad>",
            bos="<bos>",
            add_bos=True,
            generation_eos=("<end_of_turn>",),
            config=dict(
                head_dim=16, query_pre_attn_scalar=16, sliding_window=32, sliding_window_pattern=2
            ),
            wrap=_gemma3_image_text,
            blocks="model.language_model.layers",
        ),
        Family(
            "mistral",
            "MistralConfig",
            "MistralForCausalLM",
            MISTRAL_TEMPLATE,
            ("<unk>", "<s>", "</s>", "[INST]", "[/INST]"),
            eos="</s>",
            pad=None,
            bos="<s>",
            add_bos=True,  # Mistral's tokenizer has no pad token
            config=dict(sliding_window=32),
        ),  # v0.1's sliding window on every layer
        Family(
            "qwen2",
            "Qwen2Config",
            "Qwen2ForCausalLM",
            QWEN2_TEMPLATE,
            ("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
            eos="<|im_end|>",
            pad="<|endoftext|>",
            generation_eos=("<|endoftext|>",),
            config=dict(tie_word_embeddings=True),
        ),
        Family(
            "qwen3",
            "Qwen3Config",
            "Qwen3ForCausalLM",
            QWEN3_TEMPLATE,
            ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"),
            eos="<|im_end|>",
            pad="<|endoftext|>",
            generation_eos=("<|endoftext|>",),
            config=dict(head_dim=16, tie_word_embeddings=True),
        ),
        Family(
            "phi3",
            "Phi3Config",
            "Phi3ForCausalLM",
            PHI3_TEMPLATE,
            (
                "<unk>",
                "<s>",
                "</s>",
                "<|endoftext|>",
                "<|system|>",
                "<|user|>",
                "<|assistant|>",
                "<|end|>",
            ),
            eos="<|endoftext|>",
            pad="<|endoftext|>",
            bos="<s>",
            generation_eos=("<|end|>", "<|assistant|>"),
            config=dict(original_max_position_embeddings=1024),
        ),
    )
}


def tiny_family_lm(
    family: str,
    seed: int = 0,
    layers: int = 3,
    hidden: int = 32,
    dtype: torch.dtype = torch.float32,
) -> HFModel:
    """A tiny random model of ``family`` (a key of :data:`FAMILIES`) built from its own
    transformers configuration class, with its tokens and chat template."""
    import transformers

    fam = FAMILIES[family]
    tok = tiny_tokenizer(
        fam.template, fam.special_tokens, eos=fam.eos, pad=fam.pad, bos=fam.bos, add_bos=fam.add_bos
    )
    eos_ids = [tok.convert_tokens_to_ids(t) for t in (fam.eos, *fam.generation_eos)]
    config = getattr(transformers, fam.config_class)(
        **{
            "vocab_size": len(tok),
            "hidden_size": hidden,
            "intermediate_size": hidden * 2,
            "num_hidden_layers": layers,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 1024,
            "bos_token_id": tok.bos_token_id,
            "eos_token_id": eos_ids,
            "pad_token_id": tok.pad_token_id,
            "initializer_range": 0.4,  # large enough that greedy outputs vary from step to step
            **fam.config,
        }
    )
    if fam.wrap is not None:
        config = fam.wrap(config, tok)
    torch.manual_seed(seed)
    model = getattr(transformers, fam.model_class)(config).to(dtype).eval()
    model.generation_config.eos_token_id = eos_ids
    model.generation_config.pad_token_id = tok.pad_token_id
    name = f"tiny-{family}-{seed}"
    return HFModel(
        model=model,
        tokenizer=tok,
        name=name,
        model_id=name,
        revision=f"seed-{seed}",
        source_dir=Path("."),
    )


def save_tiny(lm: HFModel, directory: Path) -> Path:
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
        Concept("places", "places"),
        Concept("water", "body of water", parent="places"),
        Concept("river", "river", parent="water"),
        Concept("brook", "brook", parent="water"),
        Concept("nile", "Nile", kind="instance", parent="river"),
        Concept("danube", "Danube", kind="instance", parent="river"),
        Concept("mountain", "mountain", parent="places"),
        Concept("volcano", "volcano", parent="mountain"),
        Concept("people", "people"),
        Concept("scientist", "scientist", parent="people"),
        Concept("physicist", "physicist", parent="scientist"),
        Concept("chemist", "chemist", parent="scientist"),
    ]
    atomic = Taxonomy.from_concepts(c, name="tiny-atomic")
    comps = compose(
        atomic,
        [RelationTemplate("{} near {}", (SlotRule("mountain"), SlotRule("water")))],
        CompositionParams(branching=(4,), max_depth=3),
    )
    gen = TemplateQuestionGenerator(seed=0)
    questions = build_question_bank(atomic, gen).merge(build_question_bank(comps, gen))
    return Benchmark(atomic, comps, questions, {"name": "tiny"})


def register_test_techniques() -> None:
    """Register ``sleepy``: the unmodified model after a pause in ``prepare`` (``seconds``), so
    tests can interrupt a cell while it runs. Ray workers get it with ``imports=("workbench.testing",)``."""
    import time

    from workbench.techniques.base import TECHNIQUES, Params, register
    from workbench.techniques.base_model import Base, BaseAbstainer

    if "sleepy" in TECHNIQUES:
        return

    class SleepyParams(Params):
        seconds: float = 1.0

    @register
    class Sleepy(Base):
        name = "sleepy"
        Params = SleepyParams

        def build(self, lm: Backend, bench: Benchmark, data, directory, *, seed, progress):
            time.sleep(cast(SleepyParams, self.params).seconds)
            return BaseAbstainer(lm, data.target)


register_test_techniques()
