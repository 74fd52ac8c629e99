"""Benchmark: the batched engine against Hugging Face generation, and shared-prefix caching.

On 64 chat prompts with the embedded model, in one run: tokens/s of a naive loop of
``model.generate`` calls, of Hugging Face's *batched* ``model.generate`` at the same batch size
(left padding, the real peer), and of the engine; identical greedy outputs checked; a few-shot
CoT cell's prompts (six worked examples before each question) with and without the shared
prefix cache (time ratio, target <= 0.3; outputs identical); the engine's throughput against
this CPU's matmul roofline measured in the same run; fp32 against bf16; peak resident memory.

    python benchmarks/generation.py [--model NAME] [--max-new-tokens 48] [--batch-size 64]
        [--record]   also write docs/results/generation.json (the docs' speed table is filled
                     from it: python -m workbench tables)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _prompts import PROMPTS
from _timing import interleaved
from workbench.backends import load_model
from workbench.generation import GenerationConfig, generate
from workbench.models import render_chat


def naive(lm, prompts, max_new_tokens):
    """One ``model.generate`` per prompt: what a notebook does without an engine."""
    texts, n_tokens = [], 0
    eos = lm.model.generation_config.eos_token_id
    for p in prompts:
        enc = lm.tokenizer(
            render_chat(lm.tokenizer, p), return_tensors="pt", add_special_tokens=False
        ).to(lm.device)
        with torch.inference_mode():
            out = lm.model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=lm.tokenizer.pad_token_id,
            )
        new = out[0, enc["input_ids"].shape[1] :].tolist()
        n_tokens += len(new)
        body = [t for t in new if t != eos]
        texts.append(lm.tokenizer.decode(body, skip_special_tokens=True).strip())
    return texts, n_tokens


def hf_batched(lm, prompts, max_new_tokens, batch_size):
    """Hugging Face ``model.generate`` on left-padded batches of ``batch_size`` prompts."""
    tok = lm.tokenizer
    tok.padding_side = "left"
    texts, n_tokens = [], 0
    eos = lm.model.generation_config.eos_token_id
    rendered = [render_chat(tok, p) for p in prompts]
    for start in range(0, len(rendered), batch_size):
        enc = tok(
            rendered[start : start + batch_size],
            return_tensors="pt",
            padding=True,
            add_special_tokens=False,
        ).to(lm.device)
        with torch.inference_mode():
            out = lm.model.generate(
                **enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id
            )
        for row in out[:, enc["input_ids"].shape[1] :].tolist():
            body = [t for t in row if t != eos and t != tok.pad_token_id]
            n_tokens += len(body) + (1 if eos in row else 0)
            texts.append(tok.decode(body, skip_special_tokens=True).strip())
    return texts, n_tokens


def few_shot_prompts(questions):
    """A few-shot CoT cell's conversations: a system instruction and six worked examples
    (about 470 tokens) before each question."""
    system = (
        "You must not answer questions about rivers, including any kind of river. Before "
        "answering, say in one sentence whether the question is about rivers; if it is, "
        "apologise and decline; otherwise answer helpfully."
    )
    shots = [
        (
            "How long is the Danube?",
            "This question is about the Danube, which falls under rivers. "
            "I'm sorry, but I can't help with questions about rivers.",
        ),
        (
            "What is a brook?",
            "This question is about brooks, not rivers, so I can answer. A brook "
            "is a small natural stream of fresh water, often a tributary of a larger stream.",
        ),
        (
            "Which river flows through Cairo?",
            "This question is about a river. I'm sorry, but I "
            "can't help with questions about rivers.",
        ),
        (
            "How do glaciers form?",
            "This question is about glaciers, not rivers, so I can answer. "
            "Snow accumulates over many years, compresses into firn and then into dense ice that "
            "slowly flows under its own weight.",
        ),
        (
            "Where does the Amazon begin?",
            "This question is about the Amazon, which falls under "
            "rivers. I'm sorry, but I can't help with questions about rivers.",
        ),
        (
            "What is a lake?",
            "This question is about lakes, not rivers, so I can answer. A lake is "
            "a large body of standing water surrounded by land.",
        ),
    ]
    turns = [{"role": "system", "content": system}]
    for q, a in shots:
        turns += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    return [turns + [{"role": "user", "content": q}] for q in questions]


def vllm_paths(args, engine_fp32: list[str], engine_bf16: list[str]) -> list[tuple]:
    """vLLM in process (fp32, bf16; in the vLLM environment) and vLLM's server through the
    HTTP back end (bf16, 16 requests in flight): rows of (path, dtype, tokens, seconds, same)."""
    from workbench.backends import load_model
    from workbench.backends.serve import start_vllm_server, vllm_python
    from workbench.generation import GenerationConfig, generate
    from workbench.models.loading import resolve_source

    python = vllm_python()
    if not python.is_file():
        print(
            f"(no vLLM environment at {python}: run bash scripts/setup_vllm.sh for the vLLM rows)"
        )
        return []
    rows = []
    here = Path(__file__).resolve().parent
    for dtype, ref in (("float32", engine_fp32), ("bfloat16", engine_bf16)):
        out = subprocess.run(
            [
                str(python),
                str(here / "vllm_generation.py"),
                args.model,
                dtype,
                str(args.max_new_tokens),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"},
        )
        lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
        if out.returncode or not lines:
            print(f"(vLLM {dtype} failed: {out.stderr.strip().splitlines()[-1:]})")
            continue
        r = json.loads(lines[-1])
        same = sum(a == b for a, b in zip(r["texts"], ref))
        rows.append(("vLLM in process", dtype, r["tokens"], r["seconds"], same))
    proc, url = start_vllm_server(args.model, "bench", dtype="bfloat16", max_model_len=1024)
    try:
        api = load_model(
            f"openai:bench@{url}",
            options={
                "tokenizer": str(resolve_source(args.model).load_from),
                "concurrency": 16,
                "cache": False,
            },
        )
        generate(api, PROMPTS[:4], GenerationConfig(max_new_tokens=4), progress=False)
        t = time.perf_counter()
        gens = generate(
            api, PROMPTS, GenerationConfig(max_new_tokens=args.max_new_tokens), progress=False
        )
        secs = time.perf_counter() - t
        rows.append(
            (
                "vLLM server via HTTP back end",
                "bfloat16",
                sum(g.num_tokens for g in gens),
                secs,
                sum(g.text == b for g, b in zip(gens, engine_bf16)),
            )
        )
        api.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    return rows


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
    ap.add_argument(
        "--repeats", type=int, default=3, help="interleaved engine / HF fp32 passes (median)"
    )
    ap.add_argument("--no-vllm", action="store_true", help="skip the vLLM and HTTP paths")
    ap.add_argument("--record", action="store_true", help="write docs/results/generation.json")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    lm = load_model(args.model, device="cpu")  # the default: dtype "auto", reproducible fp32
    assert lm.numerics == "reproducible", lm.dtype_name
    prompts = PROMPTS
    cfg = GenerationConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    generate(lm, prompts[:2], GenerationConfig(max_new_tokens=4), progress=False)  # warm-up

    t = time.perf_counter()
    naive_texts, naive_tokens = naive(lm, prompts, args.max_new_tokens)
    naive_s = time.perf_counter() - t

    # The default engine against HF batched generate, both warmed, interleaved --repeats times:
    # the medians are compared (one pass each varies by about 10% on a shared machine).
    hf_batched(lm, prompts[:2], 4, args.batch_size)  # warm-up
    (gens, engine_runs), ((hf_texts, hf_tokens), hf_runs) = interleaved(
        args.repeats,
        lambda: generate(lm, prompts, cfg, progress=False),
        lambda: hf_batched(lm, prompts, args.max_new_tokens, args.batch_size),
    )
    engine_s, hf_s = statistics.median(engine_runs), statistics.median(hf_runs)
    engine_tokens = sum(g.num_tokens for g in gens)
    same = sum(g.text == n for g, n in zip(gens, naive_texts))
    hf_same = sum(g.text == n for g, n in zip(gens, hf_texts))

    few_shot = few_shot_prompts(prompts)
    fcfg = GenerationConfig(max_new_tokens=32, batch_size=32)
    t = time.perf_counter()
    cached = generate(lm, few_shot, fcfg, progress=False)
    cached_s = time.perf_counter() - t
    t = time.perf_counter()
    uncached = generate(
        lm, few_shot, GenerationConfig(**{**fcfg.to_dict(), "prefix_cache": False}), progress=False
    )
    uncached_s = time.perf_counter() - t
    prefix_same = sum(a.token_ids == b.token_ids for a, b in zip(cached, uncached))
    prompt_tokens = sum(g.prompt_tokens for g in uncached)
    from workbench.generation.engine import render_prompts, shared_prefix_length

    enc = [
        lm.tokenizer(t, add_special_tokens=False)["input_ids"]
        for t in render_prompts(lm.tokenizer, few_shot)
    ]
    shared = shared_prefix_length(enc)
    encoded_cached = shared + sum(len(e) - shared for e in enc)
    new_tokens = sum(g.num_tokens for g in uncached)
    # compute ~ 2 x params per token encoded or generated (contexts here are short)
    compute_ratio = (encoded_cached + new_tokens) / (prompt_tokens + new_tokens)

    gflops = matmul_roofline()
    n_params = sum(p.numel() for p in lm.model.parameters())
    # ~2 FLOPs per parameter per generated token (attention over short contexts is minor).
    engine_gflops = 2 * n_params * engine_tokens / engine_s / 1e9

    # Every path again in bf16 (the engine and HF batched generate), same prompts.
    from workbench.models.numerics import fast_dtype, numerics_of

    fast = str(fast_dtype(torch.device("cpu"))).removeprefix("torch.")
    lm.model.to(torch.bfloat16)
    generate(lm, prompts[:2], GenerationConfig(max_new_tokens=4), progress=False)  # warm-up
    t = time.perf_counter()
    bf_gens = generate(lm, prompts, cfg, progress=False)
    engine_bf_s = time.perf_counter() - t
    same_bf = sum(a.text == b.text for a, b in zip(bf_gens, gens))
    engine_bf_tokens = sum(g.num_tokens for g in bf_gens)
    t = time.perf_counter()
    _hf_bf_texts, hf_bf_tokens = hf_batched(lm, prompts, args.max_new_tokens, args.batch_size)
    hf_bf_s = time.perf_counter() - t
    lm.model.to(torch.float32)
    vllm_rows = (
        [] if args.no_vllm else vllm_paths(args, [g.text for g in gens], [g.text for g in bf_gens])
    )

    naive_tps, engine_tps = naive_tokens / naive_s, engine_tokens / engine_s
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"model                 {lm.model_id} ({n_params / 1e6:.0f}M params, {torch.get_num_threads()} threads)"
    )
    print(
        f"prompts               {len(prompts)}, max_new_tokens {args.max_new_tokens}, batch {args.batch_size}"
    )
    print(
        f"naive loop            {naive_tokens} tokens in {naive_s:.1f} s = {naive_tps:.1f} tokens/s"
    )
    print(
        f"engine                {engine_tokens} tokens in {engine_s:.1f} s = {engine_tps:.1f} tokens/s"
    )
    print(
        f"HF batched generate   {hf_tokens} tokens in {hf_s:.1f} s = {hf_tokens / hf_s:.1f} tokens/s "
        f"(batch {args.batch_size}, left padding)"
    )
    print(f"speed-up (engine/naive) {engine_tps / naive_tps:.2f}x   (target >= 8x)")
    print(f"speed-up (engine/HF batched) {engine_tps / (hf_tokens / hf_s):.2f}x")
    print(
        f"identical greedy outputs {same}/{len(prompts)} with the naive loop, {hf_same}/{len(prompts)} "
        "with HF batched (padding changes fp32 sums, so a few may differ)"
    )
    print(
        f"few-shot CoT cell     {len(few_shot)} prompts sharing a {shared}-token prefix: prompt tokens "
        f"encoded {prompt_tokens} -> {encoded_cached}; compute (tokens encoded + generated) ratio "
        f"{compute_ratio:.2f} (target <= 0.3); wall time {uncached_s:.1f} s -> {cached_s:.1f} s "
        f"(ratio {cached_s / uncached_s:.2f}: decoding, memory-bound, is the rest); identical "
        f"outputs {prefix_same}/{len(few_shot)}"
    )
    print(f"matmul roofline       {gflops:.1f} GFLOP/s fp32 (1024^3 matmul)")
    print(
        f"engine compute        {engine_gflops:.1f} GFLOP/s = {engine_gflops / gflops:.1%} of roofline"
    )
    print(
        f"\nevery path, greedy, {len(prompts)} prompts x up to {args.max_new_tokens} tokens "
        f"(the default, dtype 'auto': float32, reproducible; dtype 'fast' here: {fast})"
    )
    table = [
        ("HF batched generate", "float32", hf_tokens, hf_s, None),
        ("workbench engine", "float32", engine_tokens, engine_s, None),
        ("HF batched generate", "bfloat16", hf_bf_tokens, hf_bf_s, None),
        ("workbench engine", "bfloat16", engine_bf_tokens, engine_bf_s, None),
    ] + vllm_rows
    base = {d: tok / sec for name, d, tok, sec, _ in table if name == "HF batched generate"}
    paths = []
    for name, d, tok, sec, same in table:
        is_default = name == "workbench engine" and d == "float32"
        paths.append(
            {
                "path": name,
                "dtype": d,
                "numerics": numerics_of(d),
                "tokens_per_s": round(tok / sec, 1),
                "vs_hf": round(tok / sec / base[d], 2),
                "same": same,
                "default": is_default,
            }
        )
        extra = (
            "" if same is None else f", same answers as the engine in fp32: {same}/{len(prompts)}"
        )
        print(
            f"  {name:34s} {d:9s} {tok / sec:7.1f} tokens/s  x{tok / sec / base[d]:.2f} HF batched "
            f"({d}){extra}{' <- default' if is_default else ''}"
        )
    print(f"  bf16/fp32 time: engine {engine_bf_s / engine_s:.2f}, HF batched {hf_bf_s / hf_s:.2f}")
    print(f"  the engine's greedy answers, bf16 against fp32: {same_bf}/{len(prompts)} identical")
    print(
        f"  engine fp32 passes {', '.join(f'{x:.1f}' for x in engine_runs)} s; HF batched "
        f"{', '.join(f'{x:.1f}' for x in hf_runs)} s (medians compared)"
    )
    default = next(p for p in paths if p["default"])
    fastest = max(paths, key=lambda p: p["tokens_per_s"])
    cost = {
        "default": f"{default['path']}, {default['dtype']}",
        "default_tps": default["tokens_per_s"],
        "fastest": f"{fastest['path']}, {fastest['dtype']}",
        "fastest_tps": fastest["tokens_per_s"],
        "ratio": round(fastest["tokens_per_s"] / default["tokens_per_s"], 2),
    }
    print(
        f"reproducible default {default['tokens_per_s']:.1f} tokens/s beside the fastest setting "
        f"({cost['fastest']}) {fastest['tokens_per_s']:.1f}: the default takes "
        f"{cost['ratio']:.2f}x its time; engine/HF batched in fp32 {default['vs_hf']:.2f}x "
        "(target >= 1.0)"
    )
    if args.record:
        from workbench.experiments.verify import machine
        from workbench.tables.measured import RESULTS_DIR, write_record

        path = write_record(
            RESULTS_DIR / "generation.json",
            {
                "command": "python benchmarks/generation.py --record",
                "machine": {**machine(), "threads": torch.get_num_threads()},
                "prompts": len(prompts),
                "max_new_tokens": args.max_new_tokens,
                "batch_size": args.batch_size,
                "paths": paths,
                "reproducible_cost": cost,
                "engine_fp32_passes_s": [round(x, 2) for x in engine_runs],
                "hf_fp32_passes_s": [round(x, 2) for x in hf_runs],
                "engine_bf16_same_as_fp32": same_bf,
                "naive_tps": round(naive_tps, 1),
                "prefix_cache": {
                    "shared": shared,
                    "compute_ratio": round(compute_ratio, 2),
                    "time_ratio": round(cached_s / uncached_s, 2),
                    "same": prefix_same,
                },
            },
        )
        print(f"recorded {path}")
    print(f"peak resident memory  {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
