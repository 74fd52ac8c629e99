"""What the refusal probe reads: a model's residual stream over a response, mean-pooled.

A response's first ``max_tokens`` tokens go through the model, and the outputs of the chosen
decoder blocks are averaged over those tokens and put side by side. With ``context`` the
response is read as the assistant's turn after its question in the model's chat template (the
question's tokens are read but not pooled): what a refusal is depends on what was asked. The
features are cached on disk per (settings, question, text), so a response is read once however
many times it is scored or trained on.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from numbers import Number
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from workbench.errors import ConfigError

if TYPE_CHECKING:
    from workbench.generation.backend import Backend

#: longest response the probe reads (characters): it reads the first ``max_tokens`` tokens, so
#: anything longer is a mistake (a whole document pasted as one answer) rather than an answer
MAX_CHARS = 200_000


@dataclass(frozen=True)
class FeatureSettings:
    """The model read (a name ``load_model`` takes), its decoder blocks (0-based; the output
    of each), how many of a response's first tokens are pooled, and whether the response is
    read after its question (``context``: the question's last ``question_tokens`` tokens in
    the chat template; a response with no question known gets an empty user turn)."""

    model: str = "smollm2-135m-instruct"
    layers: tuple[int, ...] = (6, 12, 18, 24, 29)
    max_tokens: int = 128
    context: bool = True
    question_tokens: int = 256

    def key(self) -> str:
        d = asdict(self)
        if not self.context:  # heads that read the response alone keep their cached features
            d.pop("context"), d.pop("question_tokens")
        return json.dumps(d, sort_keys=True)


def missing(v: object) -> bool:
    """Whether a table's cell holds no value (None, NaN, ``pd.NA``, ``NaT``)."""
    if v is None or type(v).__name__ in {"NAType", "NaTType"}:
        return True
    if isinstance(v, str | bytes | bytearray):
        return False
    try:
        return bool(v != v)  # NaN
    except (TypeError, ValueError):  # an array or an object that compares oddly: a value
        return False


def _check_text(i: object, t: object, what: str) -> str:
    if isinstance(t, bytes | bytearray):
        raise ConfigError(f"{what} {i} is bytes, not text: decode it first")
    if not isinstance(t, str):
        raise ConfigError(f"{what} {i} is {type(t).__name__}, not text")
    try:
        t.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{what} {i} is not valid UTF-8 text (it holds unpaired surrogates: read the "
            "file it came from with its real encoding)"
        ) from None
    if len(t) > MAX_CHARS:
        raise ConfigError(
            f"{what} {i} is {len(t):,} characters long, above the probe's {MAX_CHARS:,} "
            f"(it reads the first tokens only): cut it first"
        )
    return t


def check_texts(texts: Sequence[object]) -> list[str]:
    """``texts`` as strings the probe can read, or one line naming the first it cannot."""
    out = []
    for i, t in enumerate(texts):
        t = _check_text(i, t, "response")
        if not t.strip():
            raise ConfigError(f"response {i} is empty: the probe has nothing to read")
        out.append(t)
    return out


def check_questions(questions: Sequence[object] | None, n: int) -> list[str | None]:
    """The question of each of ``n`` responses (``None`` where unknown: missing, NaN or
    blank), or one line naming the first the probe cannot read."""
    if questions is None:
        return [None] * n
    questions = list(questions)
    if len(questions) != n:
        raise ConfigError(f"{len(questions)} questions for {n} responses")
    return check_column(questions, range(n), "question", None, numbers=False)


def check_column(
    values: Sequence[object],
    rows: Sequence[object],
    what: str,
    blank: str | None,
    *,
    numbers: bool = True,
) -> list[str | None]:
    """``values`` (``rows``: their row labels, named as ``"{what} {row}"`` in an error) as
    text the probe can read (with ``numbers``, a number as written), ``blank`` where a value
    is missing or blank; one line naming the first it cannot read."""
    out: list[str | None] = []
    for row, v in zip(rows, values):
        if missing(v):
            out.append(blank)
            continue
        if numbers and isinstance(v, Number) and not isinstance(v, bool):
            v = str(v)
        t = _check_text(row, v, what)
        out.append(t if t.strip() else blank)
    return out


class FeatureCache:
    """Features per (settings, text) in one SQLite file: float32 bytes by a SHA-256 key."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path)
        self.db.execute("CREATE TABLE IF NOT EXISTS features (key TEXT PRIMARY KEY, vec BLOB)")

    @staticmethod
    def key(
        settings: FeatureSettings, text: str, question: str | None = None, reader: str = ""
    ) -> str:
        """The key of ``text``'s features (its question counts only where it is read; the
        reader's weights' dtype where it is not float32, :func:`reader_tag`)."""
        head = settings.key()
        if settings.context:
            head += "\n" + json.dumps(question)
        if reader:
            head += "\nread in " + reader
        return hashlib.sha256(f"{head}\n{text}".encode()).hexdigest()

    def get(self, keys: list[str]) -> dict[str, np.ndarray]:
        out = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for k, blob in self.db.execute(
                f"SELECT key, vec FROM features WHERE key IN ({marks})", chunk
            ):
                out[k] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put(self, items: dict[str, np.ndarray]) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO features VALUES (?, ?)",
            [(k, v.astype(np.float32).tobytes()) for k, v in items.items()],
        )
        self.db.commit()

    def close(self) -> None:
        self.db.close()


def reader_tag(lm: Backend, settings: FeatureSettings) -> str:
    """What of the reader ``lm`` goes into the features' cache key: "" for the model
    ``settings`` name in float32 (as it loads by default: the features every head is trained
    on), its dtype otherwise; one line where ``lm`` is another model than ``settings.model``
    (a head reads the features of the model it was trained on, and the cache keeps each
    model's apart)."""
    names = {str(getattr(lm, a, "")) for a in ("name", "model_id")}
    if settings.model not in names:
        raise ConfigError(
            f"the probe reads {settings.model!r}, not the model given ("
            f"{getattr(lm, 'name', lm)!r}): give it {settings.model!r} or no model"
        )
    dtype = str(getattr(lm, "dtype_name", "float32"))
    return "" if dtype == "float32" else dtype


def default_cache() -> FeatureCache:
    from workbench.paths import cache_home

    return FeatureCache(cache_home() / "probe" / "features.sqlite")


def _prefix(tok, question: str | None, settings: FeatureSettings) -> list[int]:
    """The tokens read before a response: its question as the user's turn of the chat template
    (plain text and a blank line for a model without one), its last ``question_tokens`` kept."""
    from workbench.models.chat import has_chat_template, render_chat

    if not settings.context:
        return []
    q = question or ""
    if has_chat_template(tok):
        text = render_chat(tok, q)
    else:
        text = f"{q}\n\n" if q else ""
    ids = tok(text, add_special_tokens=False)["input_ids"] if text else []
    return ids[-settings.question_tokens :] if settings.question_tokens > 0 else []


def _read(
    lm: Backend,
    texts: list[str],
    questions: list[str | None],
    settings: FeatureSettings,
    batch_size: int,
) -> np.ndarray:
    """Mean-pooled block outputs over the tokens of ``texts`` (already checked), each read
    after its question's prefix, in their order."""
    model, tok = getattr(lm, "model", None), getattr(lm, "tokenizer", None)
    if model is None or tok is None or not getattr(lm.capabilities, "activations", False):
        raise ConfigError(
            f"the refusal probe reads hidden states: {lm.name!r} has none to read (load it on "
            "the Hugging Face engine)"
        )
    n_layers = lm.num_layers
    bad = [l for l in settings.layers if not -n_layers <= l < n_layers]
    if bad:
        raise ConfigError(f"probe layer {bad[0]} is outside {lm.name!r}'s {n_layers} blocks")
    device = next(model.parameters()).device
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    prefixes = [_prefix(tok, q, settings) for q in questions]
    ids = [
        tok(t, add_special_tokens=False, truncation=True, max_length=settings.max_tokens)[
            "input_ids"
        ]
        or [pad]
        for t in texts
    ]
    length = [len(p) + len(r) for p, r in zip(prefixes, ids)]
    order = sorted(range(len(ids)), key=lambda i: (length[i], i))
    out = np.zeros((len(ids), len(settings.layers) * int(model.config.hidden_size)), np.float32)
    for s in range(0, len(order), batch_size):
        chunk = order[s : s + batch_size]
        width = max(length[i] for i in chunk)
        x = torch.full((len(chunk), width), pad, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)  # read (right-padded)
        pool = torch.zeros((len(chunk), width))  # pooled: the response's tokens only
        for j, i in enumerate(chunk):
            x[j, : length[i]] = torch.tensor(prefixes[i] + ids[i])
            mask[j, : length[i]] = 1
            pool[j, len(prefixes[i]) : length[i]] = 1
        with torch.inference_mode():
            hs = model(
                input_ids=x.to(device),
                attention_mask=mask.to(device),
                output_hidden_states=True,
            ).hidden_states
        m = pool.to(device)[:, :, None]
        pooled = [(hs[(l % n_layers) + 1].float() * m).sum(1) / m.sum(1) for l in settings.layers]
        out[chunk] = torch.cat(pooled, -1).cpu().numpy()
    return out


def _lookup(
    store: FeatureCache | None,
    settings: FeatureSettings,
    texts: list[str],
    qs: list[str | None],
    tag: str,
) -> tuple[list[str], dict[str, np.ndarray], list]:
    """The cache keys of ``texts``, the features the cache has, and the (key, (text,
    question)) pairs left to read, by length so that each read's batches pad little."""
    keys = [FeatureCache.key(settings, t, q, tag) for t, q in zip(texts, qs)]
    have = store.get(keys) if store is not None else {}
    todo = sorted(
        {k: (t, q) for k, t, q in zip(keys, texts, qs) if k not in have}.items(),
        key=lambda item: (len(item[1][0]) + len(item[1][1] or ""), item[0]),
    )
    return keys, have, todo


def response_features(
    texts: Sequence[object],
    settings: FeatureSettings | None = None,
    *,
    questions: Sequence[object] | None = None,
    lm: Backend | None = None,
    lazy_lm=None,
    cache: FeatureCache | bool | None = True,
    batch_size: int = 16,
    progress: bool = False,
) -> np.ndarray:
    """The probe's features of each response (to ``questions[i]``, read where ``settings``
    say so), shape ``(len(texts), layers x hidden)``; read through ``lm`` (loaded from
    ``settings.model`` when needed: only texts not in the cache are read; ``lazy_lm()`` gives
    it instead when given). ``cache=True`` uses the workbench's cache, ``False``/``None``
    none."""
    from workbench.progress import tqdm

    settings = settings or FeatureSettings()
    texts = check_texts(texts)
    qs = check_questions(questions, len(texts))
    if not settings.context:
        qs = [None] * len(texts)
    store = default_cache() if cache is True else (cache or None)
    # a reader loaded on demand is settings.model in float32: its tag is ""
    tag = reader_tag(lm, settings) if lm is not None else ""
    keys, have, todo = _lookup(store, settings, texts, qs, tag)
    if todo:
        if lm is None and lazy_lm is not None:
            lm = lazy_lm()
        if lm is None:
            from workbench.backends import load_model

            lm = load_model(settings.model, device="cpu")
        if reader_tag(lm, settings) != tag:  # loaded in another dtype than assumed
            tag = reader_tag(lm, settings)
            keys, have, todo = _lookup(store, settings, texts, qs, tag)
        step = 256
        for s in tqdm(
            range(0, len(todo), step), desc="probe features", disable=not progress, leave=False
        ):
            part = todo[s : s + step]
            read = _read(
                lm, [t for _, (t, _) in part], [q for _, (_, q) in part], settings, batch_size
            )
            got = {k: v for (k, _), v in zip(part, read)}
            have.update(got)
            if store is not None:
                store.put(got)
    if store is not None and cache is True:
        store.close()
    return np.stack([have[k] for k in keys]) if keys else np.zeros((0, 0), np.float32)
