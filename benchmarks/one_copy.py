"""Benchmark: peak memory of a ``vllm:`` grid per technique against a plain vLLM engine.

Each case runs in a process of its own with vLLM's python (.venv-vllm on CPU) and vLLM's engine
in that process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so the process's peak resident memory
holds the engine, its KV cache and whatever else the case loads:

- ``plain``: a vLLM engine answering the verify slice's questions (no steering extension);
- ``base``, ``zero_shot``, ``few_shot_cot``, ``steering``, ``sft``: the verify slice's grid
  of that one technique on ``vllm:`` (vectors read inside vLLM; adapters trained on a copy
  lent for the training only, then served);
- ``steering + second copy``: the steering grid as it ran before activations were read inside
  vLLM: its vectors read on a Hugging Face copy of the weights (fp32) held beside the engine.

    python benchmarks/one_copy.py [--cases plain,steering,...] [--record]
        (--record writes docs/results/one_copy.json, the docs' memory table)

Ratios are against ``plain`` measured in the same run. KV cache: the back end's default
(``cpu_kv_cache_gib``, 2 GiB); the ratio falls as the cache grows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = ("plain", "base", "zero_shot", "few_shot_cot", "steering", "sft", "steering + second copy")


def run_case(case: str) -> dict:
    """One case, in this process (vLLM's python)."""
    import resource

    from workbench.backends import load_model
    from workbench.experiments.verify import run_slice

    model = "vllm:smollm2-135m-instruct"
    began = time.time()
    technique = "steering" if case.startswith("steering") else case
    options = {"steering": technique == "steering", "adapters": technique == "sft"}
    lm = load_model(model, dtype="float32", options=options)
    if case == "plain":
        from workbench.generation import GenerationConfig, generate
        from workbench.taxonomy import load_benchmark

        bench = load_benchmark()
        questions = [q for qs in list(bench.questions)[:10] for q in qs.eval][:40]
        generate(lm, questions, GenerationConfig(max_new_tokens=48))
    else:
        if case == "steering + second copy":  # how the steering cell read its vectors before
            import workbench.techniques.steering as steering

            steering._activations_lm = lambda lm: lm.hf()  # the weights again, in fp32
        with tempfile.TemporaryDirectory() as tmp:
            run_slice(Path(tmp), {"models": [model], "techniques": [technique]}, {model: lm})
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lm.close()
    return {"case": case, "peak_mib": round(peak), "seconds": round(time.time() - began, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cases", default=",".join(CASES), help="comma-separated, from: " + ", ".join(CASES)
    )
    ap.add_argument("--record", action="store_true", help="write docs/results/one_copy.json")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # the child process's one case
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case)))
        return
    from workbench.backends.serve import vllm_python

    cases = [c.strip() for c in args.cases.split(",")]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        sys.exit(f"error: unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    if "plain" not in cases:
        cases.insert(0, "plain")
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    rows = []
    for case in cases:
        out = subprocess.run(
            [str(vllm_python()), __file__, "--case", case], capture_output=True, text=True, env=env
        )
        lines = [l for l in out.stdout.splitlines() if l.startswith('{"case"')]
        if out.returncode or not lines:
            sys.exit(f"error: case {case!r} failed: {out.stderr.strip().splitlines()[-3:]}")
        rows.append(json.loads(lines[-1]))
        print(
            f"{rows[-1]['case']:<24}{rows[-1]['peak_mib']:>8} MiB  {rows[-1]['seconds']:>7} s",
            flush=True,
        )
    plain = next(r["peak_mib"] for r in rows if r["case"] == "plain")
    for r in rows:
        r["ratio"] = round(r["peak_mib"] / plain, 3)
    print("\ncase                    peak MiB   x plain")
    for r in rows:
        print(f"{r['case']:<24}{r['peak_mib']:>8}   {r['ratio']:.3f}x")
    if args.record:
        from workbench.experiments.verify import machine
        from workbench.tables.measured import RESULTS_DIR, write_record

        path = write_record(
            RESULTS_DIR / "one_copy.json",
            {
                "command": "python benchmarks/one_copy.py --record",
                "machine": {
                    **machine(),
                    "dtype": "float32",
                    "numerics": "reproducible",
                    "kv_cache_gib": 2,
                },
                "rows": rows,
            },
        )
        print(f"recorded {path}")


if __name__ == "__main__":  # vLLM starts processes
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
