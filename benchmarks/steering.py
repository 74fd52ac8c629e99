"""Benchmark: the cost of conditional steering, and of collecting validation similarities.

On the same 64 chat prompts with the embedded model: plain batched generation against
conditionally steered generation with the default gate (decided before steering: a voting
prompt pass, a second, steered prompt pass for the prompts that fired, one decoding loop), as
seconds per generated token (steered rows that abstain stop at other lengths, so whole-run
times alone could mislead) and as wall time; target ratio <= 1.15. For comparison, a separate
decision pass (``decide``, what the inspector uses) and the in-pass decision (CAST's: no
second pass, the prompt steered only past the condition layers), and whether they agree. Then the throughput of collecting every layer's
last-token activations for validation prompts (prompts/s).

    python benchmarks/steering.py [--concept wn:09411430-n] [--max-new-tokens 48]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _prompts import PROMPTS
from workbench.backends import load_model
from workbench.generation import GenerationConfig, generate
from workbench.steering import collect_activations
from workbench.taxonomy import load_benchmark
from workbench.techniques import get_technique


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--concept", default="wn:09411430-n")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    args = ap.parse_args()
    lm = load_model(args.model, device="cpu")
    bench = load_benchmark()
    t = time.perf_counter()
    ab = get_technique("steering").prepare(lm, bench, args.concept)
    prep_s = time.perf_counter() - t
    cfg = GenerationConfig(max_new_tokens=args.max_new_tokens, batch_size=64)
    generate(lm, PROMPTS[:2], GenerationConfig(max_new_tokens=4), progress=False)  # warm-up

    t = time.perf_counter()
    plain = generate(lm, PROMPTS, cfg, progress=False)
    plain_s = time.perf_counter() - t
    t = time.perf_counter()
    separate = ab.decide(PROMPTS)
    decide_s = time.perf_counter() - t
    t = time.perf_counter()
    steered = ab.generate(PROMPTS, cfg, progress=False)  # decision pass + steered generation
    steer_s = time.perf_counter() - t
    decisions = ab.gate_decisions
    ab.separate = False  # the same gate, decided inside the prompt pass
    t = time.perf_counter()
    ab.generate(PROMPTS, cfg, progress=False)
    in_pass_s = time.perf_counter() - t
    agree = int((ab.gate_decisions == separate).sum())
    plain_tok = sum(g.num_tokens for g in plain)
    steer_tok = sum(g.num_tokens for g in steered)

    val = [q for c in list(bench.atomic.concepts)[:40] for q in bench.questions[c].validation][:200]
    layers = list(range(lm.num_layers))
    t = time.perf_counter()
    acts = collect_activations(lm, val, layers, batch_size=64)
    collect_s = time.perf_counter() - t

    per_plain, per_steer = plain_s / plain_tok, steer_s / steer_tok
    print(f"model                    {lm.model_id}, {torch.get_num_threads()} threads")
    print(
        f"concept                  {bench.concept(args.concept).name} ({args.concept}); prepared in {prep_s:.1f} s"
    )
    print(f"condition fired          {int(decisions.sum())}/{len(PROMPTS)} prompts")
    print(
        f"plain generation         {plain_tok} tokens in {plain_s:.2f} s = {1e3 * per_plain:.2f} ms/token"
    )
    print(
        f"conditional steering     {steer_tok} tokens in {steer_s:.2f} s = {1e3 * per_steer:.2f} ms/token"
    )
    print(f"separate decide() pass   {decide_s:.2f} s (not needed by generate; for the inspector)")
    print(
        f"in-pass decisions        {in_pass_s:.2f} s wall; they agree with the separate pass on {agree}/{len(PROMPTS)}"
    )
    print(
        f"overhead ratio           {per_steer / per_plain:.3f}x per token, {steer_s / plain_s:.3f}x wall   (target <= 1.15x)"
    )
    print(
        f"validation similarities  {len(val)} prompts x {len(layers)} layers in {collect_s:.2f} s = "
        f"{len(val) / collect_s:.1f} prompts/s  (activations {tuple(acts.shape)})"
    )
    print(
        f"peak resident memory     {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )


if __name__ == "__main__":
    main()
