"""Measures for responses to the unknown: refusal, accuracy, verbalized confidence, entropy,
perplexity, and calibration summaries."""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence

import pandas as pd
import torch

from workbench.generation import GenerationConfig, generate, render_prompts
from workbench.generation.batching import pad_batch
from workbench.scoring.phrases import detect_refusal, keyword_refusal

CONFIDENCE_PROMPT = (
    "Here is a question:\n\n{question}\n\nHow sure are you that you could answer it correctly? "
    "Reply with one whole number from 0 (not at all sure) to 10 (completely sure) and nothing else."
)
#: The assistant's reply is started with this, so that a small model says a number; what it
#: writes next is its verbalized confidence (parsed, or counted as unparsed).
CONFIDENCE_PREFIX = "My confidence from 0 to 10 is:"
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten".split())}


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (SQuAD-style normalisation)."""
    text = text.lower().replace("’", "'")
    text = "".join(" " if ch in string.punctuation and ch != "'" else ch for ch in text)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def lexical_match(response: str, gold: Sequence[str]) -> bool:
    """Whether any gold answer appears, as whole words, in the normalised response."""
    resp = f" {normalize_answer(response)} "
    return any(f" {normalize_answer(g)} " in resp for g in gold if normalize_answer(g))


def parse_confidence(text: str) -> int | None:
    """The first number 0-10 in a reply ("7", "7/10", "I'd say 8.", "0.0", "seven"), rounded to a
    whole level; None when there is none or it is out of range ("11", "100%")."""
    t = text.strip().lower()
    m = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)(?![\d.]*\d)(\s*%)?", t)
    if m:
        value = float(m.group(1))
        if m.group(2) or not 0 <= value <= 10:
            return None
        return int(math.floor(value + 0.5))
    m = re.search(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", t)
    return _NUMBER_WORDS[m.group(1)] if m else None


def _batches(n: int, size: int):
    for start in range(0, n, size):
        yield range(start, min(n, start + size))


def next_token_entropy(lm, prompts: Sequence[str], batch_size: int = 32, chat: bool = True) -> list[float]:
    """Entropy (nats) of the model's next-token distribution right after each prompt
    (with ``chat``, at the start of the assistant's turn)."""
    tok, model = lm.tokenizer, lm.model
    texts = render_prompts(tok, prompts, chat=chat)
    enc = [tok(t, add_special_tokens=not chat)["input_ids"] for t in texts]
    out = [0.0] * len(texts)
    device = next(model.parameters()).device
    pad = tok.pad_token_id or 0
    with torch.inference_mode():
        for idx in _batches(len(texts), batch_size):
            ids, mask = pad_batch([enc[i] for i in idx], pad, "left")
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                           position_ids=pos.to(device)).logits[:, -1, :].float()
            logp = torch.log_softmax(logits, -1)
            ent = -(logp.exp() * logp).sum(-1)
            for r, i in enumerate(idx):
                out[i] = float(ent[r])
    return out


def prompt_perplexity(lm, texts: Sequence[str], batch_size: int = 32) -> list[float]:
    """Perplexity of each raw text under the model: exp(mean NLL of tokens 2..n)."""
    tok, model = lm.tokenizer, lm.model
    enc = [tok(t, add_special_tokens=True)["input_ids"] for t in texts]
    out = [float("nan")] * len(texts)
    device = next(model.parameters()).device
    pad = tok.pad_token_id or 0
    with torch.inference_mode():
        for idx in _batches(len(texts), batch_size):
            ids, mask = pad_batch([enc[i] for i in idx], pad, "right")  # positions 0..n-1
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
            logp = torch.log_softmax(logits[:, :-1], -1)
            nll = -logp.gather(-1, ids[:, 1:, None].to(device))[..., 0]
            m = mask[:, 1:].to(device).float()
            for r, i in enumerate(idx):
                n = m[r].sum()
                if n > 0:
                    out[i] = math.exp(float((nll[r] * m[r]).sum() / n))
    return out


def evaluate_unknown(lm, items, abstainer=None, max_new_tokens: int = 48, batch_size: int = 32,
                     progress: bool = False) -> pd.DataFrame:
    """Answer, ask for confidence, and measure entropy and perplexity for every item."""
    prompts = [i.prompt for i in items]
    cfg = GenerationConfig(max_new_tokens=max_new_tokens, batch_size=batch_size)
    answerer = abstainer.generate if abstainer is not None else (
        lambda qs, c, progress: generate(lm, qs, c, progress=progress))
    answers = answerer(prompts, cfg, progress=progress)
    conf_prompts = [render_prompts(lm.tokenizer, [CONFIDENCE_PROMPT.format(question=p)])[0] + CONFIDENCE_PREFIX
                    for p in prompts]
    conf = generate(lm, conf_prompts, GenerationConfig(max_new_tokens=4, batch_size=batch_size),
                    chat=False, progress=progress)
    entropy = next_token_entropy(lm, prompts, batch_size)
    ppl = prompt_perplexity(lm, prompts, batch_size)
    rows = []
    for item, a, c, e, p in zip(items, answers, conf, entropy, ppl):
        phrase = detect_refusal(a.text)
        rows.append({"task": item.task, "partition": item.partition, "category": item.category,
                     "prompt": item.prompt, "response": a.text, "refused_phrase": phrase.refused,
                     "refused_keyword": keyword_refusal(a.text),
                     "correct": lexical_match(a.text, item.gold) if item.gold else None,
                     "confidence_reply": c.text, "confidence": parse_confidence(c.text),
                     "entropy": e, "perplexity": p})
    return pd.DataFrame(rows)


def summarize_unknown(rows: pd.DataFrame, detector: str = "refused_phrase") -> pd.DataFrame:
    """Per task and partition: refusal rates, accuracy where defined, confidence, entropy."""
    out = []
    for (task, part), f in rows.groupby(["task", "partition"], sort=True):
        correct = f["correct"].dropna()
        out.append({"task": task, "partition": part, "n": len(f),
                    "refusal_rate": f[detector].mean(), "keyword_refusal_rate": f["refused_keyword"].mean(),
                    "accuracy": correct.astype(float).mean() if len(correct) else float("nan"),
                    "mean_confidence": f["confidence"].dropna().mean(),
                    "unparsed_confidence": int(f["confidence"].isna().sum()),
                    "mean_entropy": f["entropy"].mean(), "mean_perplexity": f["perplexity"].mean()})
    return pd.DataFrame(out)


def by_confidence(rows: pd.DataFrame, detector: str = "refused_phrase") -> pd.DataFrame:
    """Refusal rate and accuracy at each verbalized-confidence level (0-10)."""
    f = rows.dropna(subset=["confidence"])
    g = f.groupby("confidence")
    out = pd.DataFrame({"n": g.size(), "refusal_rate": g[detector].mean(),
                        "accuracy": g["correct"].apply(lambda s: s.dropna().astype(float).mean())})
    return out.reset_index()


def expected_calibration_error(rows: pd.DataFrame) -> float:
    """ECE of verbalized confidence (divided by 10) against lexical accuracy, over items with a
    gold answer and a parsed confidence; bins are the eleven confidence levels."""
    f = rows.dropna(subset=["confidence"])
    f = f[f["correct"].notna()]
    if f.empty:
        return float("nan")
    total = 0.0
    for level, g in f.groupby("confidence"):
        total += len(g) / len(f) * abs(g["correct"].astype(float).mean() - level / 10)
    return total
