"""Benchmark: the batched engine against a naive loop of ``model.generate`` calls.

Prints tokens/s for both on 64 chat prompts with the embedded model, the speed-up ratio
(target >= 8x on 2 CPU cores), checks that both produce the same greedy outputs, prints the
engine's throughput as a fraction of this CPU's matmul roofline measured in the same run, fp32
against bf16 on a short run, and the peak resident memory.

    python benchmarks/generation.py [--model NAME] [--max-new-tokens 48] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _prompts import PROMPTS  # noqa: E402

from workbench.generation import GenerationConfig, generate  # noqa: E402
from workbench.models import load_model, render_chat  # noqa: E402


def naive(lm, prompts, max_new_tokens):
    """One ``model.generate`` per prompt: what a notebook does without an engine."""
    texts, n_tokens = [], 0
    eos = lm.model.generation_config.eos_token_id
    for p in prompts:
        enc = lm.tokenizer(render_chat(lm.tokenizer, p), return_tensors="pt",
                           add_special_tokens=False).to(lm.device)
        with torch.inference_mode():
            out = lm.model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                    pad_token_id=lm.tokenizer.pad_token_id)
        new = out[0, enc["input_ids"].shape[1]:].tolist()
        n_tokens += len(new)
        body = [t for t in new if t != eos]
        texts.append(lm.tokenizer.decode(body, skip_special_tokens=True).strip())
    return texts, n_tokens


def matmul_roofline(dtype=torch.float32, n=1024, repeats=20) -> float:
    """Sustained GFLOP/s of a square matmul on this machine (the roofline we compare against)."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    for _ in range(3):
        a @ b
    t = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n**3 * repeats / (time.perf_counter() - t) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    lm = load_model(args.model, device="cpu", dtype="float32")
    prompts = PROMPTS
    cfg = GenerationConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    generate(lm, prompts[:2], GenerationConfig(max_new_tokens=4), progress=False)  # warm-up

    t = time.perf_counter()
    naive_texts, naive_tokens = naive(lm, prompts, args.max_new_tokens)
    naive_s = time.perf_counter() - t

    t = time.perf_counter()
    gens = generate(lm, prompts, cfg, progress=False)
    engine_s = time.perf_counter() - t
    engine_tokens = sum(g.num_tokens for g in gens)
    same = sum(g.text == n for g, n in zip(gens, naive_texts))

    gflops = matmul_roofline()
    n_params = sum(p.numel() for p in lm.model.parameters())
    # ~2 FLOPs per parameter per generated token (attention over short contexts is minor).
    engine_gflops = 2 * n_params * engine_tokens / engine_s / 1e9

    # fp32 vs bf16 on this CPU, on 16 prompts.
    sub = GenerationConfig(max_new_tokens=16, batch_size=16)
    t = time.perf_counter()
    generate(lm, prompts[:16], sub, progress=False)
    fp32_s = time.perf_counter() - t
    lm.model.to(torch.bfloat16)
    t = time.perf_counter()
    generate(lm, prompts[:16], sub, progress=False)
    bf16_s = time.perf_counter() - t
    lm.model.to(torch.float32)

    naive_tps, engine_tps = naive_tokens / naive_s, engine_tokens / engine_s
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"model                 {lm.model_id} ({n_params / 1e6:.0f}M params, {torch.get_num_threads()} threads)")
    print(f"prompts               {len(prompts)}, max_new_tokens {args.max_new_tokens}, batch {args.batch_size}")
    print(f"naive loop            {naive_tokens} tokens in {naive_s:.1f} s = {naive_tps:.1f} tokens/s")
    print(f"engine                {engine_tokens} tokens in {engine_s:.1f} s = {engine_tps:.1f} tokens/s")
    print(f"speed-up (engine/naive) {engine_tps / naive_tps:.2f}x   (target >= 8x)")
    print(f"identical greedy outputs {same}/{len(prompts)}")
    print(f"matmul roofline       {gflops:.1f} GFLOP/s fp32 (1024^3 matmul)")
    print(f"engine compute        {engine_gflops:.1f} GFLOP/s = {engine_gflops / gflops:.1%} of roofline")
    print(f"fp32 vs bf16 (16 prompts x 16 tokens) {fp32_s:.2f} s vs {bf16_s:.2f} s: bf16/fp32 time ratio {bf16_s / fp32_s:.2f}")
    print(f"peak resident memory  {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
