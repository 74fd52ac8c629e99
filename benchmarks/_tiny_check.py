"""The GPU check that fits a lent GPU machine: the Hugging Face engine's path on tiny random
models built on the spot from each model family's own configuration class.

Per family: every technique (base, zero_shot, few_shot_cot, steering, sft, sft_dpo) prepared
and answered on the device and on the CPU, in fp32 (TF32 off); the answers' tokens, the
steering gate's decisions and votes, its vectors and thresholds must agree. Then the one-copy
memory check: on a wider tiny model, what each technique holds beyond the model's own weights
while it prepares and answers (CUDA: the peak of allocated memory; CPU: the tensors alive
after it prepared): no second copy for an inference-time technique, one at most (its merged
copy) for a fine-tuned one. Nothing is downloaded: the
models, tokenizers and the taxonomy are built in memory (``workbench.testing``).
"""

from __future__ import annotations

import gc
import importlib.util
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

#: the techniques every family runs, with the settings that keep a tiny run short
TECHNIQUES: dict[str, dict[str, Any]] = {
    "base": {},
    "zero_shot": {},
    "few_shot_cot": {},
    "steering": {},
    "sft": {"epochs": 1, "batch_size": 8, "answer_tokens": 8},
    "sft_dpo": {"epochs": 1, "batch_size": 8, "answer_tokens": 8},
}
TRAINED = ("sft", "sft_dpo")
QUESTIONS = [
    "What is a river?",
    "Name a famous physicist.",
    "Which volcano erupted most recently?",
    "Tell me about the Danube.",
]
TARGET = "river"
#: the steering gate's thresholds may differ by this much between devices (fp32 reductions)
THRESHOLD_TOLERANCE = 1e-5
#: and its vectors' cosine must be at least this
COSINE = 0.99999

#: what a technique may hold beyond the model's weights, as a share of them: an inference-time
#: technique no copy (a few buffers and activations), a fine-tuned one its merged copy (one)
INFERENCE_SHARE, TRAINED_SHARE = 0.5, 1.5

Check = Callable[[str, bool, str], None]


@dataclass
class Run:
    """What one family's techniques gave on one device."""

    tokens: dict[str, list[list[int]]] = field(default_factory=dict)
    decisions: list[bool] = field(default_factory=list)
    votes: list[Any] = field(default_factory=list)  # each question's votes, as the grid keeps them
    vectors: torch.Tensor | None = None
    thresholds: list[float] = field(default_factory=list)
    seconds: float = 0.0
    skipped: dict[str, str] = field(default_factory=dict)


def fp32_everywhere() -> None:
    """Float32 matrix products as float32 (no TF32) on every device, deterministic kernels."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def missing_trainer() -> str | None:
    """Why the fine-tuning techniques cannot run here (trl or datasets absent), or None."""
    absent = [m for m in ("trl", "datasets") if importlib.util.find_spec(m) is None]
    if absent:
        return (
            f"{' and '.join(absent)} not installed: carry the wheels (pip install --no-deps "
            "--no-index WHEELS; trl needs datasets, which needs pyarrow, pandas, dill, "
            "multiprocess, xxhash and fsspec)"
        )
    return None


def run_family(family: str, device: str, *, layers: int = 3, hidden: int = 32) -> Run:
    """Every technique of :data:`TECHNIQUES` on a tiny ``family`` model on ``device``."""
    from workbench.generation import GenerationConfig
    from workbench.techniques import ArtifactStore, get_technique
    from workbench.testing import tiny_benchmark, tiny_family_lm

    bench = tiny_benchmark()
    lm = tiny_family_lm(family, layers=layers, hidden=hidden)
    lm.model.to(device)
    cfg = GenerationConfig(max_new_tokens=12, batch_size=4)
    run = Run()
    no_trainer = missing_trainer()
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        store = ArtifactStore(tmp)
        for name, params in TECHNIQUES.items():
            if name in TRAINED and no_trainer:
                run.skipped[name] = no_trainer
                continue
            ab = get_technique(name, **params).prepare(lm, bench, TARGET, store=store)
            gens = ab.generate(QUESTIONS, cfg, progress=False)
            run.tokens[name] = [list(g.token_ids) for g in gens]
            if name == "steering":
                run.decisions = [bool(d) for d in ab.gate_decisions.tolist()]
                run.votes = list(getattr(ab, "gate_votes", None) or [])
                cond = ab.steerer.condition
                run.vectors = cond.vectors.vectors.detach().float().cpu()
                run.thresholds = [float(x) for x in cond.thresholds]
            ab.close()
    run.seconds = time.perf_counter() - t
    return run


def compare(family: str, device: str, ref: Run, got: Run, check: Check) -> None:
    """Checks of ``got`` (on ``device``) against ``ref`` (on the CPU), one line each."""
    for name in TECHNIQUES:
        if name in got.skipped or name in ref.skipped:
            check(f"{family}: {name}", False, got.skipped.get(name) or ref.skipped[name])
            continue
        same = sum(a == b for a, b in zip(ref.tokens[name], got.tokens[name]))
        check(
            f"{family}: {name}, answers on {device} equal the CPU's",
            same == len(QUESTIONS),
            f"{same}/{len(QUESTIONS)} answers token for token",
        )
    if "steering" in got.tokens and ref.vectors is not None and got.vectors is not None:
        cos = torch.nn.functional.cosine_similarity(ref.vectors, got.vectors, dim=-1).min()
        gap = max((abs(a - b) for a, b in zip(ref.thresholds, got.thresholds)), default=0.0)
        check(
            f"{family}: steering gate on {device} equals the CPU's",
            got.decisions == ref.decisions
            and got.votes == ref.votes
            and float(cos) >= COSINE
            and gap <= THRESHOLD_TOLERANCE
            and len(got.thresholds) == len(ref.thresholds),
            f"decisions {got.decisions} (CPU {ref.decisions}), votes equal: "
            f"{got.votes == ref.votes}, vectors' cosine >= {float(cos):.6f}, thresholds within "
            f"{gap:.1e}",
        )


def _live_bytes(device: torch.device) -> int:
    """Bytes of the distinct tensor storages alive on ``device`` (parameters included)."""
    gc.collect()
    seen: dict[int, int] = {}
    for obj in gc.get_objects():
        try:
            if torch.is_tensor(obj) and obj.device == device:
                storage = obj.untyped_storage()
                seen[storage.data_ptr()] = storage.nbytes()
        except Exception:  # objects that look like tensors but are not (proxies, fakes)
            continue
    return sum(seen.values())


def memory_check(family: str, device: str, check: Check) -> None:
    """What each technique holds beyond the model's own weights, as a share of them (CUDA:
    peak allocated memory while it prepares and answers; CPU: the tensors alive once it
    prepared): an inference-time technique no second copy, a fine-tuned one one at most."""
    from workbench.generation import GenerationConfig
    from workbench.techniques import ArtifactStore, get_technique
    from workbench.testing import tiny_benchmark, tiny_family_lm

    dev = torch.device(device)
    bench = tiny_benchmark()
    lm = tiny_family_lm(family, layers=4, hidden=512)
    lm.model.to(dev)
    weights = sum(p.numel() * p.element_size() for p in lm.model.parameters())
    cfg = GenerationConfig(max_new_tokens=8, batch_size=4)
    no_trainer = missing_trainer()
    shares = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = ArtifactStore(tmp)
        for name, params in TECHNIQUES.items():
            if name in TRAINED and no_trainer:
                continue
            gc.collect()
            if dev.type == "cuda":
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            else:
                base = _live_bytes(dev)
            ab = get_technique(name, **params).prepare(lm, bench, TARGET, store=store)
            ab.generate(QUESTIONS, cfg, progress=False)
            if dev.type == "cuda":
                torch.cuda.synchronize()
                extra = torch.cuda.max_memory_allocated() - base
            else:
                extra = _live_bytes(dev) - base
            shares[name] = extra / weights
            ab.close()
            del ab
    how = (
        "peak allocated while preparing and answering"
        if dev.type == "cuda"
        else "tensors alive once prepared"
    )
    size = f"{family}, {weights / 2**20:.0f} MiB of weights"
    inference = {n: x for n, x in shares.items() if n not in TRAINED}
    check(
        f"no second copy of the weights for inference-time techniques on {device} ({size})",
        all(x < INFERENCE_SHARE for x in inference.values()),
        f"{how}, beyond the weights: "
        + ", ".join(f"{n} {x:.2f}x" for n, x in inference.items())
        + f" (target < {INFERENCE_SHARE}x)",
    )
    trained = {n: x for n, x in shares.items() if n in TRAINED}
    if trained:
        check(
            f"one more copy at most for fine-tuning on {device} ({size})",
            all(x < TRAINED_SHARE for x in trained.values()),
            f"{how}, beyond the weights: "
            + ", ".join(f"{n} {x:.2f}x" for n, x in trained.items())
            + f" (target < {TRAINED_SHARE}x: the Hugging Face engine answers through a merged "
            "copy of the weights, trained as a LoRA on it)",
        )
