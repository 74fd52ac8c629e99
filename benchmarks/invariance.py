"""Benchmark: do greedy answers depend on the batch or the CPU kernels, per dtype?

The embedded model on the 64 benchmark prompts, greedy, 48 new tokens, for fp32 (the default,
``dtype="auto"``) and bf16 (the speed-first choice): how many of the 64 answers at batch 16 and
at batch 1 equal those at batch 64, how many equal them in a fresh process on narrower CPU
kernels (``workbench.models.numerics.other_kernels_env``), the largest difference of
first-token logits between batch 1 and batch 64, and the time of each batch-64 pass.

    python benchmarks/invariance.py [--record] [--skip-batch-1 bfloat16]

``--record`` writes ``docs/results/invariance.json``, from which the docs' table is filled
(``python -m workbench tables``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _prompts import PROMPTS  # noqa: E402
from workbench.backends import load_model  # noqa: E402
from workbench.generation import GenerationConfig, generate  # noqa: E402


def tokens(lm, batch_size: int, max_new_tokens: int) -> list[list[int]]:
    cfg = GenerationConfig(max_new_tokens=max_new_tokens, batch_size=batch_size)
    return [g.token_ids for g in generate(lm, PROMPTS, cfg, progress=False)]


def logit_gap(lm) -> float:
    """Largest |logit| difference of the first generated token, batch 1 against batch 64."""
    from workbench.generation.batching import pad_batch
    from workbench.generation.engine import last_token_logits, render_prompts

    tok = lm.tokenizer
    enc = [tok(t, add_special_tokens=False)["input_ids"] for t in render_prompts(tok, PROMPTS)]
    with torch.inference_mode():
        ids, mask = pad_batch(enc, tok.pad_token_id, "left")
        full = last_token_logits(lm.model, ids, mask)
        worst = 0.0
        for i in range(0, len(enc), 8):
            one_ids, one_mask = pad_batch([enc[i]], tok.pad_token_id, "left")
            one = last_token_logits(lm.model, one_ids, one_mask)[0]
            worst = max(worst, (one - full[i]).abs().max().item())
    return worst


def same(got: list[list[int]], ref: list[list[int]]) -> int:
    return sum(a == b for a, b in zip(got, ref))


def other_kernels(dtype: str, max_new_tokens: int) -> tuple[str, list[list[int]]]:
    from workbench.models.numerics import other_kernels_env

    out = subprocess.run(
        [sys.executable, __file__, "--worker", dtype, "--max-new-tokens", str(max_new_tokens)],
        env={**os.environ, **other_kernels_env()},
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return got["kernels"], got["tokens"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--skip-batch-1", nargs="*", default=[], help="dtypes without the batch-1 pass")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        lm = load_model(device="cpu", dtype=args.worker)
        print(
            json.dumps(
                {
                    "kernels": torch.backends.cpu.get_cpu_capability(),
                    "tokens": tokens(lm, 64, args.max_new_tokens),
                }
            )
        )
        return
    rows = []
    for dtype in ("float32", "bfloat16"):
        lm = load_model(device="cpu", dtype=dtype)
        start = time.perf_counter()
        ref = tokens(lm, 64, args.max_new_tokens)
        seconds = time.perf_counter() - start
        row = {
            "dtype": dtype,
            "numerics": lm.numerics,
            "batch_16": same(tokens(lm, 16, args.max_new_tokens), ref),
            "batch_1": None
            if dtype in args.skip_batch_1
            else same(tokens(lm, 1, args.max_new_tokens), ref),
            "logit_gap": logit_gap(lm),
            "batch_64_seconds": round(seconds, 1),
        }
        kernels, other = other_kernels(dtype, args.max_new_tokens)
        row["other_kernels"], row["other_kernels_name"] = same(other, ref), kernels
        rows.append(row)
        print(json.dumps(row), flush=True)
    fp32 = rows[0]["batch_64_seconds"]
    for r in rows:
        r["time_vs_fp32"] = round(r["batch_64_seconds"] / fp32, 2)
    if args.record:
        from workbench.experiments.verify import machine
        from workbench.tables.measured import RESULTS_DIR, write_record

        path = write_record(
            RESULTS_DIR / "invariance.json",
            {
                "command": "python benchmarks/invariance.py --record",
                "machine": {**machine(), "threads": torch.get_num_threads()},
                "prompts": len(PROMPTS),
                "max_new_tokens": args.max_new_tokens,
                "rows": rows,
            },
        )
        print(f"recorded {path}")


if __name__ == "__main__":
    main()
