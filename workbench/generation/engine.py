"""Batched generation over many chat prompts.

Why a decode loop of our own rather than ``model.generate``: the workbench needs (1) per-sample
seeds, so a sampled answer does not depend on its batch neighbours (resumed runs reproduce);
(2) hooks that know which prompt each row belongs to, for conditional steering; (3) finished rows
dropped from the batch as soon as they end (EOS, a stop string, or a caller's predicate such as
"a refusal is already visible"); (4) the prompt's forward pass done once for K samples. The
loop is the textbook one (left padding, attention mask, KV cache, position ids from the mask).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from workbench.generation.batching import pad_batch
from workbench.generation.config import FinishReason, Generation, GenerationConfig
from workbench.generation.hooks import ForwardHook, StepState, UnsupportedModelError, attached
from workbench.models.chat import Prompt, render_chat
from workbench.progress import tqdm

if TYPE_CHECKING:
    from workbench.generation.backend import Backend

#: ``stop_when(text) -> bool`` ends a sample early once its text so far satisfies it.
StopPredicate = Callable[[str], bool]


def sample_seed(base: int, prompt_text: str, sample: int) -> int:
    """A 63-bit seed for one (prompt, sample), independent of batch composition."""
    digest = hashlib.sha256(f"{base}\x00{sample}\x00{prompt_text}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def render_prompts(
    tokenizer: Any, prompts: Sequence[Prompt], system: str | None = None, chat: bool = True
) -> list[str]:
    """Render each prompt with the chat template (or pass strings through when ``chat=False``)."""
    if chat:
        return [render_chat(tokenizer, p, system=system) for p in prompts]
    if not all(isinstance(p, str) for p in prompts):
        raise TypeError("with chat=False every prompt must be a string")
    return list(prompts)  # type: ignore[arg-type]


def eos_token_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (gen_eos, tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value is not None:
            ids.update(int(v) for v in value)
    return ids


def _filter_top_p(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    if top_p >= 1.0:
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    cumulative = sorted_probs.cumsum(-1)
    drop = cumulative - sorted_probs > top_p  # keep the smallest prefix reaching top_p
    sorted_probs = sorted_probs.masked_fill(drop, 0.0)
    filtered = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return filtered / filtered.sum(-1, keepdim=True)


def _supports_logits_to_keep(model: Any) -> bool:
    try:
        return "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def last_token_logits(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: int = 1
) -> torch.Tensor:
    """Float logits at the last ``keep`` positions of left-padded rows, ``[batch, keep, vocab]``
    (``[batch, vocab]`` for ``keep=1``), computing the output head there only: a full
    ``[batch, length, vocab]`` tensor is gigabytes for long prompts and a 49k vocabulary."""
    device = next(model.parameters()).device
    mask = attention_mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    extra = {"logits_to_keep": keep} if _supports_logits_to_keep(model) else {}
    out = model(
        input_ids=input_ids.to(device), attention_mask=mask, position_ids=positions, **extra
    )
    logits = out.logits[:, -keep:, :].float()
    return logits[:, -1, :] if keep == 1 else logits


def generate(
    lm: Backend,
    prompts: Sequence[Prompt],
    config: GenerationConfig | None = None,
    *,
    hooks: Sequence[ForwardHook] = (),
    stop_when: StopPredicate | None = None,
    chat: bool = True,
    progress: bool = True,
    desc: str = "generating",
    repass: Callable[[list[int]], Sequence[bool]] | None = None,
) -> list[Generation]:
    """Generate ``config.num_samples`` completions for every prompt, on whatever engine ``lm``
    is (a :class:`~workbench.backends.Backend`): the one call techniques, the judge and the
    suites make.

    Args:
        lm: a loaded model (``workbench.backends.load_model``); engines without forward hooks
            refuse ``hooks`` and ``repass`` in one line.
        prompts: user messages or lists of chat messages.
        config: decoding settings (greedy, 64 new tokens by default).
        hooks: forward hooks active for the whole call; each receives the :class:`StepState`.
        stop_when: optional predicate on a sample's text so far; True ends that sample.
        chat: render prompts with the chat template (False: prompts are final strings).
        progress: show a progress bar.
        repass: see :func:`run_engine`.

    Returns:
        One :class:`Generation` per (prompt, sample), ordered by prompt then sample.
    """
    return lm.generate_prompts(
        prompts,
        config or GenerationConfig(),
        chat=chat,
        stop_when=stop_when,
        progress=progress,
        desc=desc,
        hooks=hooks,
        repass=repass,
    )


def run_engine(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Prompt],
    config: GenerationConfig | None = None,
    *,
    hooks: Sequence[ForwardHook] = (),
    stop_when: StopPredicate | None = None,
    chat: bool = True,
    progress: bool = True,
    desc: str = "generating",
    repass: Callable[[list[int]], Sequence[bool]] | None = None,
) -> list[Generation]:
    """The workbench's engine: batched, KV-cached decoding of a transformers ``model`` with
    forward hooks (what the Hugging Face back end answers with).

    ``prompts``, ``config``, ``hooks``, ``stop_when``, ``chat``, ``progress`` and ``desc`` are as
    for :func:`generate`.

    Args:
        model: the transformers model.
        tokenizer: its tokenizer (padding on the left).
        repass: called after a batch's prompt pass with the batch's prompt indices; the
            prompts it returns True for get their prompt pass run once more (hooks see
            ``state.repass``) and continue from that second pass: a caller can decide from the
            first pass, through hooks, which prompts to treat differently from their first token.
            A second pass is always encoded whole, shared prefix included.

    Returns:
        One :class:`Generation` per (prompt, sample), ordered by prompt then sample.
    """
    config = config or GenerationConfig()
    texts = render_prompts(tokenizer, prompts, config.system_prompt, chat=chat)
    if not texts:
        return []
    encoded = [tokenizer(t, add_special_tokens=not chat)["input_ids"] for t in texts]
    if any(len(ids) == 0 for ids in encoded):
        raise ValueError("a prompt rendered to zero tokens")
    k = config.num_samples
    # Longest first: neighbours have similar lengths, so little padding; a slow batch shows early.
    order = sorted(range(len(texts)), key=lambda i: -len(encoded[i]))
    prompts_per_batch = max(1, config.batch_size // k)
    results: dict[tuple[int, int], Generation] = {}
    state = StepState()
    eos = eos_token_ids(model, tokenizer)
    bar = tqdm(total=len(texts) * k, desc=desc, disable=not progress, leave=False)
    try:
        with torch.inference_mode():
            prefix = None  # encoded before the hooks attach: they never see the prefix pass
            n_shared = shared_prefix_length(encoded)
            if (
                config.prefix_cache
                and all(h.prefix_safe for h in hooks)
                and n_shared >= config.min_prefix_tokens
            ):
                prefix = _encode_prefix(model, encoded[0][:n_shared])
        with torch.inference_mode(), attached(model, hooks, state):
            for start in range(0, len(order), prompts_per_batch):
                chunk = order[start : start + prompts_per_batch]
                for gen in _generate_batch(
                    model,
                    tokenizer,
                    chunk,
                    encoded,
                    texts,
                    config,
                    state,
                    eos,
                    stop_when,
                    bar,
                    prefix,
                    repass,
                ):
                    results[(gen.prompt_index, gen.sample)] = gen
    finally:
        bar.close()
    return [results[(i, s)] for i in range(len(texts)) for s in range(k)]


def shared_prefix_length(encoded: Sequence[Sequence[int]]) -> int:
    """Tokens every prompt starts with, leaving at least one token of each prompt after them."""
    if len(encoded) < 2:
        return 0
    first, n = encoded[0], min(len(e) for e in encoded) - 1
    for e in encoded[1:]:
        i = 0
        while i < n and e[i] == first[i]:
            i += 1
        n = i
    return max(0, n)


@dataclass
class _Prefix:
    """A shared prompt prefix, encoded once: its tokens and KV cache (batch of one)."""

    ids: list[int]
    cache: Any


def _require_kv_cache(model) -> None:
    """The engine pads, shifts and splices per-token key-value caches: a model that carries a
    recurrent state instead (Mamba, RWKV, hybrids; transformers marks them ``_is_stateful``)
    gets a one-line error here rather than a shape error deep inside its forward pass."""
    if getattr(model, "_is_stateful", False):
        raise UnsupportedModelError(
            f"{type(model).__name__} keeps a recurrent state, not a per-token key-value cache: the "
            "workbench's engine (left padding, shared-prefix cache, row removal) cannot run it"
        )


def _encode_prefix(model, ids: list[int]) -> _Prefix:
    from transformers import DynamicCache

    _require_kv_cache(model)
    device = next(model.parameters()).device
    cache = DynamicCache()
    t = torch.tensor([ids], device=device)
    model(
        input_ids=t,
        attention_mask=torch.ones_like(t),
        position_ids=torch.arange(len(ids), device=device)[None],
        past_key_values=cache,
        use_cache=True,
        **({"logits_to_keep": 1} if _supports_logits_to_keep(model) else {}),
    )
    return _Prefix(list(ids), cache)


def _generate_batch(
    model,
    tokenizer,
    chunk,
    encoded,
    texts,
    config,
    state,
    eos,
    stop_when,
    bar,
    prefix: _Prefix | None = None,
    repass=None,
):
    _require_kv_cache(model)
    device = next(model.parameters()).device
    k = config.num_samples
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos, default=0)

    from transformers import DynamicCache

    # The batch's layout is always that of whole prompts, left-padded: padding before every real
    # token, so a key's column distance is its position distance (sliding-window and chunked
    # attention masks count columns). A shared prefix only supplies the KV of the first columns.
    full_ids, full_mask = pad_batch([encoded[i] for i in chunk], pad_id, "left")
    full_ids, full_mask = full_ids.to(device), full_mask.to(device)
    full_positions = (full_mask.cumsum(-1) - 1).clamp(min=0)
    if prefix is None:
        input_ids, mask, positions, cache = full_ids, full_mask, full_positions, DynamicCache()
    else:
        n = len(prefix.ids)
        input_ids, mask, positions = full_ids[:, n:], full_mask, full_positions[:, n:]
        cache = _prefix_rows(prefix, (full_mask[:, :n] == 0).sum(-1).tolist())
    extra = {"logits_to_keep": 1} if _supports_logits_to_keep(model) else {}
    state.rows = torch.tensor(chunk, dtype=torch.long)
    state.samples = torch.zeros(len(chunk), dtype=torch.long)
    state.step = 0
    state.attention_mask = mask
    out = model(
        input_ids=input_ids,
        attention_mask=mask,
        position_ids=positions,
        past_key_values=cache,
        use_cache=True,
        **extra,
    )
    logits = out.logits[:, -1, :]
    cache = out.past_key_values
    again = [j for j, flag in enumerate(repass(list(chunk))) if flag] if repass is not None else []
    if again:  # a second prompt pass for these rows; its cache and logits replace theirs
        idx = torch.tensor(again, device=device)
        state.rows, state.repass = torch.tensor([chunk[j] for j in again], dtype=torch.long), True
        state.samples = torch.zeros(len(again), dtype=torch.long)
        state.attention_mask = mask[idx]
        try:  # encoded whole, shared prefix included (the hooks see every position)
            out2 = model(
                input_ids=full_ids[idx],
                attention_mask=full_mask[idx],
                position_ids=full_positions[idx],
                past_key_values=DynamicCache(),
                use_cache=True,
                **extra,
            )
        finally:
            state.repass = False
        logits[idx] = out2.logits[:, -1, :]
        _splice_rows(cache, out2.past_key_values, idx)
    if k > 1:  # one prefill serves all K samples of a prompt
        cache.batch_repeat_interleave(k)
        logits = logits.repeat_interleave(k, dim=0)
        mask = mask.repeat_interleave(k, dim=0)
    rows = [(i, s) for i in chunk for s in range(k)]
    generators = None
    if config.do_sample:
        generators = []
        for i, s in rows:
            g = torch.Generator(device=device)
            g.manual_seed(sample_seed(config.seed, texts[i], s))
            generators.append(g)
    tokens_so_far: list[list[int]] = [[] for _ in rows]
    logprobs: list[list[float]] = [[] for _ in rows]
    active = list(range(len(rows)))  # positions into `rows` of the batch's current rows
    step = 0
    while True:
        logits = logits.float()
        if config.do_sample:
            probs = torch.softmax(logits / config.temperature, dim=-1)
            probs = _filter_top_p(probs, config.top_p)
            nxt = torch.stack(
                [
                    torch.multinomial(probs[j], 1, generator=generators[a])[0]
                    for j, a in enumerate(active)
                ]
            )
        else:
            nxt = logits.argmax(dim=-1)
        if config.return_logprobs:
            chosen = torch.log_softmax(logits, dim=-1).gather(-1, nxt[:, None])[:, 0].tolist()
        nxt_list = nxt.tolist()
        step += 1
        keep: list[int] = []
        for j, a in enumerate(active):
            tok = nxt_list[j]
            tokens_so_far[a].append(tok)
            if config.return_logprobs:
                logprobs[a].append(chosen[j])
            reason = _finished(tok, tokens_so_far[a], tokenizer, config, eos, stop_when)
            if reason is None:
                keep.append(j)
                continue
            i, s = rows[a]
            yield _make_generation(
                i, s, tokens_so_far[a], logprobs[a], reason, tokenizer, config, eos, len(encoded[i])
            )
            bar.update(1)
        if not keep:
            return
        if len(keep) < len(active):
            idx = torch.tensor(keep, device=device)
            cache.batch_select_indices(idx)
            mask = mask[idx]
            nxt = nxt[idx]
            active = [active[j] for j in keep]
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
        positions = mask.sum(-1, keepdim=True) - 1
        state.rows = torch.tensor([rows[a][0] for a in active], dtype=torch.long)
        state.samples = torch.tensor([rows[a][1] for a in active], dtype=torch.long)
        state.step = step
        state.attention_mask = mask
        out = model(
            input_ids=nxt[:, None],
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
        )
        logits = out.logits[:, -1, :]


def _prefix_rows(prefix: _Prefix, pads: list[int]):
    """A cache of the first ``len(prefix.ids)`` columns of a left-padded batch whose row ``r``
    starts with ``pads[r]`` padding columns and then the prefix: the prefix's keys and values
    shifted right by the padding (zeros, masked, before them). The prefix tokens pushed past
    those columns are encoded again with the rows' own tokens, in place of padding."""
    from transformers import DynamicCache

    cache = DynamicCache()
    kv = _kv_pairs(prefix.cache)
    device = kv[0][0].device
    src = torch.arange(len(prefix.ids), device=device) - torch.tensor(pads, device=device)[:, None]
    padding = (src < 0)[:, None, :, None]  # rows x 1 x columns x 1
    src = src.clamp(min=0)
    for layer, (k, v) in enumerate(kv):  # [1, heads, n, dim] -> [rows, heads, n, dim]
        keys = k[0][:, src].transpose(0, 1).masked_fill(padding, 0.0)
        values = v[0][:, src].transpose(0, 1).masked_fill(padding, 0.0)
        cache.update(keys, values, layer)
    return cache


def _kv_pairs(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The (keys, values) tensors of each layer of a DynamicCache (transformers 4.x and 5.x)."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


def _splice_rows(cache, other, idx: torch.Tensor) -> None:
    """Overwrite rows ``idx`` of ``cache`` with the rows of ``other`` (same sequence length)."""
    for (k, v), (k2, v2) in zip(_kv_pairs(cache), _kv_pairs(other)):
        k[idx] = k2
        v[idx] = v2


def _finished(tok, ids, tokenizer, config, eos, stop_when) -> FinishReason | None:
    if tok in eos:
        return "eos"
    if config.stop_strings or stop_when is not None:
        text = tokenizer.decode(ids, skip_special_tokens=True)
        if any(s in text for s in config.stop_strings):
            return "stop_string"
        if stop_when is not None and stop_when(text):
            return "stop_when"
    if len(ids) >= config.max_new_tokens:
        return "length"
    return None


def _make_generation(i, s, ids, lps, reason, tokenizer, config, eos, prompt_len) -> Generation:
    body = [t for t in ids if t not in eos]
    text = tokenizer.decode(body, skip_special_tokens=True)
    if reason == "stop_string":
        cut = min(text.index(s) for s in config.stop_strings if s in text)
        text = text[:cut]
    return Generation(
        prompt_index=i,
        sample=s,
        text=text.strip(),
        token_ids=list(ids),
        finish_reason=reason,
        prompt_tokens=prompt_len,
        logprobs=list(lps) if config.return_logprobs else None,
    )
