"""Benchmark: the cost of conditional steering, and of collecting validation similarities.

On the same 64 chat prompts with the embedded model: plain batched generation against
conditionally steered generation with the default gate (decided before steering: a voting
prompt pass, a second, steered prompt pass for the prompts that fired, one decoding loop), as
seconds per generated token (steered rows that abstain stop at other lengths, so whole-run
times alone could mislead) and as wall time; target ratio <= 1.15. For comparison, a separate
decision pass (``decide``, what the inspector uses) and the in-pass decision (CAST's: no
second pass, the prompt steered only past the condition layers), and whether they agree. Then
the throughput of collecting every layer's last-token activations for validation prompts
(prompts/s).

With vLLM's environment present (``.venv-vllm``), the same abstainer steers inside vLLM, in
process and through ``serve --steering`` (benchmarks/vllm_steering.py; the server also with
every pass's prompts new to the prefix cache): steered and unsteered tokens/s per path,
steered / unsteered time per token on vLLM (target <= 1.15x), and how many steered answers
equal the engine's.

    python benchmarks/steering.py [--concept wn:09411430-n] [--max-new-tokens 48] [--no-vllm]
        [--repeats 2] [--record]   (--record writes docs/results/steering.json, the docs'
        steering speed table: python -m workbench tables)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _prompts import PROMPTS
from _timing import interleaved
from workbench.backends import load_model
from workbench.generation import GenerationConfig, generate
from workbench.steering import collect_activations
from workbench.tables.measured import steered_step_costs, step_costs_line
from workbench.taxonomy import load_benchmark
from workbench.techniques import get_technique


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--concept", default="wn:09411430-n")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--no-vllm", action="store_true", help="the engine only")
    ap.add_argument("--no-server", action="store_true", help="vLLM in process only")
    ap.add_argument(
        "--repeats", type=int, default=2, help="interleaved passes per path (the fastest counts)"
    )
    ap.add_argument("--record", action="store_true", help="write docs/results/steering.json")
    args = ap.parse_args()
    lm = load_model(args.model, device="cpu")
    bench = load_benchmark()
    t = time.perf_counter()
    ab = get_technique("steering").prepare(lm, bench, args.concept)
    prep_s = time.perf_counter() - t
    cfg = GenerationConfig(max_new_tokens=args.max_new_tokens, batch_size=64)
    generate(lm, PROMPTS[:2], GenerationConfig(max_new_tokens=4), progress=False)  # warm-up

    # plain and steered interleaved, the fastest of --repeats passes each (as vLLM's rows)
    (plain, plain_runs), (steered, steer_runs) = interleaved(
        args.repeats,
        lambda: generate(lm, PROMPTS, cfg, progress=False),
        lambda: ab.generate(PROMPTS, cfg, progress=False),  # decision pass + steered generation
    )
    plain_s, steer_s = min(plain_runs), min(steer_runs)
    decisions = ab.gate_decisions
    t = time.perf_counter()
    separate = ab.decide(PROMPTS)
    decide_s = time.perf_counter() - t
    ab.separate = False  # the same gate, decided inside the prompt pass
    t = time.perf_counter()
    in_pass = ab.generate(PROMPTS, cfg, progress=False)
    in_pass_s = time.perf_counter() - t
    ab.separate = True  # vLLM's rows steer as the steered row above did
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
    print(f"passes                   fastest of {args.repeats}, plain and steered interleaved")
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
    if args.no_vllm:
        return
    engine = {
        "path": "engine (Hugging Face, in process)",
        "unsteered_tps": plain_tok / plain_s,
        "steered_tps": steer_tok / steer_s,
        "ratio": per_steer / per_plain,
        "same": None,
        "same_unsteered": None,
        "reference": True,  # the answers the others are compared with
        "passes_s": {
            "unsteered": [round(x, 2) for x in plain_runs],
            "steered": [round(x, 2) for x in steer_runs],
        },
    }
    reference = {
        "unsteered": [g.text for g in plain],
        "steered": [g.text for g in steered],
        "steered_in_pass": [g.text for g in in_pass],
    }
    paths = [engine, *vllm_paths(args, ab, reference)]
    base = next((r for r in paths if r["path"] == "vLLM compiled plain"), None)
    for r in paths:
        if base is not None and r is not engine:
            r["unsteered_vs_plain"] = r["unsteered_tps"] / base["unsteered_tps"]
            if r["steered_tps"] is not None:
                r["steered_vs_plain"] = r["steered_tps"] / base["unsteered_tps"]
            if r is not base and base["path"] in r.get("group", []):
                r["unsteered_vs_plain_rounds"] = paired_rounds(r, base)
    print(
        "\npath                            unsteered tok/s  steered tok/s  steered/unsteered"
        "  unsteered vs compiled plain  same answers as the engine (unsteered, steered)"
    )
    for r in paths:
        same = (
            "reference"
            if r.get("reference")
            else f"{_same(r['same_unsteered'])}, {_same(r['same'])} of {len(PROMPTS)}"
        )
        print(
            f"{r['path']:<36}{r['unsteered_tps']:>11.1f}{_num(r['steered_tps'], 15, 1)}"
            f"{_num(r['ratio'], 17, 3)}x{_num(r.get('unsteered_vs_plain'), 28, 3)}x  {same}"
        )
    printed = set()  # the in_pass row shares its engine's unsteered passes
    for r in paths:
        rounds = r.get("unsteered_vs_plain_rounds")
        if rounds and tuple(rounds) not in printed:
            printed.add(tuple(rounds))
            print(
                f"{r['path']}, unsteered against compiled plain round by round: median "
                f"{statistics.median(rounds):.3f}x ({min(rounds):.2f}x-{max(rounds):.2f}x over "
                f"{len(rounds)} rounds; target >= 0.95x)"
            )
    for r in paths:
        costs = steered_step_costs(r)
        if costs is not None:
            print(f"{r['path']}, a steered pass's engine steps: {step_costs_line(costs)}")
    if args.record:
        from workbench.experiments.verify import machine
        from workbench.tables.measured import RESULTS_DIR, write_record

        path = write_record(
            RESULTS_DIR / "steering.json",
            {
                "command": "python benchmarks/steering.py --record"
                + (f" --repeats {args.repeats}" if args.repeats != 2 else ""),
                "machine": {
                    **machine(),
                    "threads": torch.get_num_threads(),
                    "dtype": lm.dtype_name,
                    "numerics": lm.numerics,
                },
                "prompts": len(PROMPTS),
                "max_new_tokens": args.max_new_tokens,
                "concept": args.concept,
                "fired": int(decisions.sum()),
                "repeats": args.repeats,
                "paths": paths,
            },
        )
        print(f"recorded {path}")


def paired_rounds(r: dict, base: dict) -> list[float]:
    """Round by round, ``r``'s unsteered speed against ``base``'s (engines loaded side by side,
    their passes alternating): each round's two passes ran within seconds of each other, so
    their ratio is what a shared machine's drift disturbs least; their median is the paired
    estimate beside the fastest passes' ratio. From each pass's own unrounded seconds and
    tokens (a GPU's passes can be short enough for rounding to move a ratio)."""
    mine, theirs = r["passes"]["unsteered"], base["passes"]["unsteered"]
    return [(n / s) / (n_base / b) for (s, n), (b, n_base) in zip(mine, theirs)]


def _num(x, width: int, digits: int) -> str:
    return f"{'-':>{width + 1}}" if x is None else f"{x:>{width}.{digits}f}"


def _count_same(got: list[str] | None, reference: list[str]) -> int | None:
    return None if got is None else sum(a == b for a, b in zip(got, reference))


def _same(n) -> str:
    return "-" if n is None else str(n)


def kv_cache_gib(max_new_tokens: int) -> str:
    """vLLM's CPU key/value cache per engine, in GiB: enough for every kind of pass (unsteered,
    steered, in CAST's order: the steered ones' prompts under cache salts of their own) to keep
    its 64 prompts' blocks in the prefix cache while a pass runs, 1 GiB at 48 new tokens and a
    GiB more per 96 tokens (with 1 GiB at 256 new tokens the steered passes' blocks pushed the
    others' out: their fired prompts restarted at +0.63 s against +0.10 s with 3 GiB).
    ``VLLM_CPU_KVCACHE_SPACE``, when set, decides instead."""
    return os.environ.get("VLLM_CPU_KVCACHE_SPACE") or str(max(1, math.ceil(max_new_tokens / 96)))


def vllm_paths(args, ab, reference: dict[str, list[str]]) -> list[dict]:
    """vLLM in process (compiled plain, compiled steering, eager steering) and vLLM's server,
    unsteered and steered, in vLLM's environment; each path's answers compared with the
    engine's (``reference``), unsteered and steered."""
    from workbench.backends.serve import vllm_python

    python = vllm_python()
    if not python.is_file():
        print(f"(no vLLM environment at {python}: run bash scripts/setup_vllm.sh for vLLM's rows)")
        return []
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(ab.spec().to_json())
        cmd = [
            str(python),
            str(Path(__file__).resolve().parent / "vllm_steering.py"),
            args.model,
            str(spec),
            str(args.max_new_tokens),
            str(args.repeats),
            *(["--no-server"] if args.no_server else []),
        ]
        out = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": kv_cache_gib(args.max_new_tokens)},
        )
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode or not lines:
        print(f"(vLLM failed: {out.stderr.strip().splitlines()[-3:]})")
        return []
    result = json.loads(lines[-1])
    found = []
    for label, r in result.get("in_process", {}).items():
        found.append((f"vLLM {label}", r))
        if "steered_in_pass" in r:  # the abstainer in CAST's order, against its own reference
            found.append(
                (
                    f"vLLM {label}, the abstainer in CAST's order (in_pass)",
                    {
                        **r,
                        "steered": r["steered_in_pass"],
                        "texts": {**r["texts"], "steered": r["texts"]["steered_in_pass"]},
                        "reference": "steered_in_pass",
                    },
                )
            )
    for way, label in (
        ("gate in prefill", "vLLM server, eager (64 in flight)"),
        ("gate pass", "vLLM server, eager, each gate a request of its own first"),
        ("gate in prefill, new prompts", "vLLM server, eager, prompts new to the prefix cache"),
        (
            "gate pass, new prompts",
            "vLLM server, eager, prompts new to the prefix cache, each gate a request first",
        ),
    ):
        if way in result.get("server", {}):
            # prompts new to the prefix cache: answers to other prompts than the engine's
            found.append((label, {**result["server"][way], "new_prompts": "new prompts" in way}))
    rows = []
    for label, r in found:
        un, st = r["unsteered"], r.get("steered")

        rows.append(
            {
                "path": label,
                "unsteered_tps": un["tokens"] / un["seconds"],
                "steered_tps": st["tokens"] / st["seconds"] if st else None,
                "ratio": (st["seconds"] / st["tokens"]) / (un["seconds"] / un["tokens"])
                if st
                else None,
                "same": _count_same(
                    r["texts"].get("steered"), reference[r.get("reference", "steered")]
                ),
                "same_unsteered": _count_same(r["texts"].get("unsteered"), reference["unsteered"]),
                "new_prompts": bool(r.get("new_prompts")),
                # the engines loaded together with this one, their passes alternating
                "group": [f"vLLM {g}" for g in r.get("group", [])],
                "start_s": r.get("start_s"),
                "passes_s": {
                    k: v["passes_s"] for k, v in (("unsteered", un), ("steered", st)) if v
                },
                "passes": {k: v["passes"] for k, v in (("unsteered", un), ("steered", st)) if v},
                # in process: every pass's engine steps (count, first, second, decoding, sum)
                "steps": {
                    k: v["steps"]
                    for k, v in (("unsteered", un), ("steered", st))
                    if v and "steps" in v
                },
            }
        )
    return rows


if __name__ == "__main__":
    main()
