"""The GPU path, checked: on the machine a GPU comes on, and on a user's own GPU machine.

By default (fits a lent GPU machine: PyTorch, transformers, peft and accelerate; no vLLM, Ray or
network; trl carried as a wheel), in a few minutes: the Hugging Face engine's path on tiny
random models built on the spot from each model family's configuration class
(``benchmarks/_tiny_check.py``): every technique (base, zero_shot, few_shot_cot, steering, sft,
sft_dpo) on the device and on the CPU in fp32, whose answers, gate decisions and votes, vectors
and thresholds must agree; and the one-copy memory check (no technique holds a second copy of
the weights). The Hugging Face engine runs eagerly: compiled steering and CUDA graphs are vLLM's
(``--full``). ``--device cpu`` runs the same checks on the CPU (CI does, so the script is known
to work before a GPU runs it).

``--full`` (a user's GPU machine with vLLM, Ray and the embedded model):

1. A small grid with every technique (base, zero_shot, few_shot_cot, steering, sft, sft_dpo) on
   the Hugging Face engine on CUDA (``dtype="auto"``: fp32, TF32 off), locally and on a local Ray
   cluster with one GPU worker: the two give the same rows.
2. The same grid's techniques on the vLLM back end in process (``vllm:smollm2-135m-instruct``;
   adapters served over the base weights, steering inside vLLM), compared with the engine's.
3. The judge on vLLM against the engine's.
4. Steering inside vLLM on the shared 64 prompts: fp32 answers and gate decisions equal the
   engine's (compiled and eager); steered vLLM's throughput against the engine's steered
   throughput at batch 64 (target >= 5x); steered / unsteered time per token on the compiled
   steering engine (target <= 1.05x), its unsteered requests against a compiled plain engine
   (target >= 0.95x); the steering grid's vectors read inside vLLM with no second copy.

Prints one line per check (PASS / FAIL with numbers) and a JSON summary for the README; exits 1
if a check fails, 2 if the device is absent.

    python benchmarks/gpu_check.py [--device cuda|cpu] [--families llama3,qwen2] [--json F]
    python benchmarks/gpu_check.py --full [--questions 6] [--skip-ray] [--skip-vllm] [--json F]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # the workbench, where not installed

KEY = ["model", "technique", "target", "seed", "question_index", "sample"]
TECHNIQUES = ("base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="where the tiny models run (cuda or cpu)")
    ap.add_argument(
        "--families", default=None, help="comma-separated model families (default: all)"
    )
    ap.add_argument("--full", action="store_true", help="the embedded model, vLLM and Ray")
    ap.add_argument("--questions", type=int, default=6, help="--full: questions per group")
    ap.add_argument("--target", default="wn:09411430-n", help="--full: the target concept")
    ap.add_argument("--json", default=None, help="write the summary here")
    ap.add_argument("--skip-ray", action="store_true", help="--full: no Ray executor")
    ap.add_argument("--skip-vllm", action="store_true", help="--full: no vLLM back end")
    args = ap.parse_args()
    import torch

    summary: dict = {"torch": torch.__version__, "python": platform.python_version(), "checks": {}}
    failed = False

    def check(name, ok, detail):
        nonlocal failed
        failed |= not ok
        summary["checks"][name] = {"ok": bool(ok), "detail": detail}
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)

    def done() -> int:
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=2)
        return 1 if failed else 0

    if not args.full:
        try:
            from workbench.testing import FAMILIES
        except ModuleNotFoundError as e:  # a lent machine has torch, transformers, peft, ...
            print(f"missing module {e.name!r}: carry its wheel (pip install --no-deps --no-index)")
            return 2

        families = args.families.split(",") if args.families else list(FAMILIES)
        unknown = [f for f in families if f not in FAMILIES]
        if unknown:
            print(f"unknown family {unknown[0]!r}: one of {', '.join(FAMILIES)}")
            return 2
        if args.device.startswith("cuda") and not torch.cuda.is_available():
            print("no CUDA device: --device cpu checks the script itself; nothing was run")
            return 2
        summary["device"] = (
            torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"
        )
        tiny_checks(check, args.device, families, summary)
        return done()

    if not torch.cuda.is_available():
        print("no CUDA device: this script checks the GPU path; nothing was run")
        return 2
    from workbench.experiments import ExperimentConfig, Runner
    from workbench.taxonomy import load_benchmark

    bench = load_benchmark()
    summary["device"] = torch.cuda.get_device_name(0)

    q = args.questions
    config = dict(
        name="gpu-check",
        techniques=TECHNIQUES,
        targets=(args.target,),
        seeds=(0,),
        n_target=q,
        n_descendant=q // 2,
        n_specificity=q // 2,
        n_unrelated=0,
        max_new_tokens=32,
        early_stop=False,
    )
    t = time.perf_counter()
    local = Runner(
        ExperimentConfig(**config), root=tempfile.mkdtemp(), bench=bench, progress=False
    ).run()
    local_s = time.perf_counter() - t
    local = local.sort_values(KEY).reset_index(drop=True)
    check(
        "hf engine, every technique",
        set(local["technique"]) == set(TECHNIQUES) and set(local["dtype"]) == {"float32"},
        f"{len(local)} rows in {local_s:.0f} s, dtype {sorted(set(local['dtype']))}",
    )

    if not args.skip_ray:
        import ray

        ray.init(num_gpus=1, include_dashboard=False, log_to_driver=False)
        try:
            t = time.perf_counter()
            remote = Runner(
                ExperimentConfig(**{**config, "name": "gpu-check-ray"}),
                root=tempfile.mkdtemp(),
                bench=bench,
                progress=False,
                executor="ray",
                workers=1,
                resources_per_worker={"CPU": 1, "GPU": 1},
            ).run()
            remote = remote.sort_values(KEY).reset_index(drop=True)
            same = remote["response"].tolist() == local["response"].tolist()
            check(
                "ray executor on the GPU",
                same,
                f"{len(remote)} rows in {time.perf_counter() - t:.0f} s, "
                f"same responses as local: {same}",
            )
        finally:
            ray.shutdown()

    if not args.skip_vllm:
        vconfig = {
            **config,
            "name": "gpu-check-vllm",
            "models": ("vllm:smollm2-135m-instruct",),
            "techniques": ("base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo"),
        }
        t = time.perf_counter()
        served = Runner(
            ExperimentConfig(**vconfig), root=tempfile.mkdtemp(), bench=bench, progress=False
        ).run()
        served = served.sort_values(KEY).reset_index(drop=True)
        ours = local[local["technique"].isin(vconfig["techniques"])].reset_index(drop=True)
        agree = sum(a == b for a, b in zip(served["response"], ours["response"]))
        check(
            "vllm back end (adapters served)",
            agree >= 0.9 * len(ours) and set(served["backend"]) == {"vllm"},
            f"{agree}/{len(ours)} answers equal to the engine's in {time.perf_counter() - t:.0f} s "
            "(vLLM's kernels round differently: a few may differ)",
        )
        from workbench.backends import load_model
        from workbench.scoring.judge import LLMJudge

        pairs = [
            ("What is the capital of France?", "Paris."),
            ("How do I pick a lock?", "I'm sorry, but I can't help with that."),
        ]
        hf = LLMJudge(load_model()).judge(pairs)
        with load_model("vllm:smollm2-135m-instruct") as v:
            vj = LLMJudge(v).judge(pairs)
        diff = max(abs(a.p_refusal - b.p_refusal) for a, b in zip(hf, vj))
        check("judge on vllm", diff < 0.02, f"max |p_refusal difference| {diff:.4f}")
        steering_checks(check, bench, args.target)
    return done()


def tiny_checks(check, device: str, families: list[str], summary: dict) -> None:
    """The Hugging Face engine's path on tiny models of each family: ``device`` against the
    CPU (on ``cpu``: a second run against the first, which checks the script and that runs
    repeat), then the one-copy memory check."""
    from _tiny_check import compare, fp32_everywhere, memory_check, run_family

    fp32_everywhere()
    t = time.perf_counter()
    seconds = {}
    for family in families:
        ref = run_family(family, "cpu")
        got = run_family(family, device)
        seconds[family] = {"cpu": round(ref.seconds, 1), device: round(got.seconds, 1)}
        compare(family, device, ref, got, check)
    memory_check(families[0], device, check)
    total = time.perf_counter() - t
    summary["seconds"] = {"families": seconds, "total": round(total, 1)}
    print(f"{len(families)} families in {total:.0f} s", flush=True)


def steering_checks(check, bench, target: str) -> None:
    """Steering inside vLLM against the engine on CUDA, fp32, batch 64: a compiled plain
    engine, the compiled steering engine (unsteered and steered requests) and the eager one;
    the steering grid's vectors read inside vLLM with no second copy of the weights."""
    import torch

    from _prompts import PROMPTS
    from workbench.backends import load_model
    from workbench.generation import GenerationConfig, generate
    from workbench.techniques import get_technique

    cfg = GenerationConfig(max_new_tokens=48, batch_size=64)
    hf = load_model(dtype="float32")
    ab = get_technique("steering").prepare(hf, bench, target)
    ab.generate(PROMPTS[:4], GenerationConfig(max_new_tokens=4), progress=False)  # warm-up
    t = time.perf_counter()
    engine = ab.generate(PROMPTS, cfg, progress=False)
    engine_s = time.perf_counter() - t
    engine_fired = ab.gate_decisions.tolist()
    spec = ab.spec()
    del hf
    rows: dict = {}
    for label, options in (
        # like the steering engine, its engine core in this process (the back end's choice for
        # a steering engine); vLLM's default placement beside it, for what that choice costs
        ("compiled plain", {"steering": False, "in_process": True}),
        (
            "compiled plain, engine core in its own process",
            {"steering": False, "in_process": False},
        ),
        ("compiled steering", {"steering": True}),
        ("eager steering", {"steering": True, "compiled": False}),
    ):
        opts = {**options, "max_model_len": 1024}
        with load_model("vllm:smollm2-135m-instruct", dtype="float32", options=opts) as v:
            warm = GenerationConfig(max_new_tokens=4)
            generate(v, PROMPTS[:4], warm, progress=False)
            row: dict = {}
            t = time.perf_counter()
            plain = generate(v, PROMPTS, cfg, progress=False)
            row["unsteered_tps"] = sum(g.num_tokens for g in plain) / (time.perf_counter() - t)
            if options["steering"]:
                v.generate_steered(PROMPTS[:4], warm, [spec] * 4, progress=False)
                t = time.perf_counter()
                gens, records = v.generate_steered(
                    PROMPTS, cfg, [spec] * len(PROMPTS), progress=False
                )
                row["steered_tps"] = sum(g.num_tokens for g in gens) / (time.perf_counter() - t)
                row["same"] = sum(a.token_ids == b.token_ids for a, b in zip(engine, gens))
                row["fired_same"] = sum(
                    bool(r["fired"]) == f for r, f in zip(records, engine_fired)
                )
            if label == "compiled steering":  # the grid's vectors, read inside vLLM
                free, total = torch.cuda.mem_get_info()
                before = total - free
                get_technique("steering").prepare(v, bench, target)
                free, total = torch.cuda.mem_get_info()
                row["memory_ratio"] = (total - free) / before
                row["second_copy"] = v._hf is not None
            rows[label] = row
    for label in ("compiled steering", "eager steering"):
        r = rows[label]
        check(
            f"{label} inside vllm, fp32, same answers",
            r["same"] == len(PROMPTS) and r["fired_same"] == len(PROMPTS),
            f"{r['same']}/{len(PROMPTS)} answers and {r['fired_same']}/{len(PROMPTS)} decisions "
            "equal to the engine's",
        )
    plain_tps = rows["compiled plain"]["unsteered_tps"]
    c = rows["compiled steering"]
    ratio = c["unsteered_tps"] / c["steered_tps"]
    check(
        "compiled steering: steered / unsteered time per token",
        ratio <= 1.05,
        f"{ratio:.2f}x (target <= 1.05x)",
    )
    check(
        "compiled steering engine's unsteered requests vs a compiled plain engine",
        c["unsteered_tps"] / plain_tps >= 0.95,
        f"{c['unsteered_tps'] / plain_tps:.2f}x (target >= 0.95x)",
    )
    own = rows["compiled plain, engine core in its own process"]["unsteered_tps"]
    check(
        "compiled plain: engine core in this process vs in its own",
        True,
        f"{plain_tps / own:.2f}x the tokens/s (information: where the engine core runs)",
    )
    e = rows["eager steering"]
    check(
        "compiled steered vs eager steered speed",
        True,
        f"{c['steered_tps'] / e['steered_tps']:.2f}x (CUDA graphs and torch.compile)",
    )
    engine_tps = sum(g.num_tokens for g in engine) / engine_s
    check(
        "steered vllm vs steered engine, batch 64",
        c["steered_tps"] / engine_tps >= 5.0,
        f"{c['steered_tps']:.0f} vs {engine_tps:.0f} tokens/s = "
        f"{c['steered_tps'] / engine_tps:.1f}x (target >= 5x)",
    )
    check(
        "one copy: the steering grid's vectors read inside vllm",
        c["memory_ratio"] <= 1.1 and not c["second_copy"],
        f"GPU memory after preparing {c['memory_ratio']:.3f}x before; second copy loaded: "
        f"{c['second_copy']} (target <= 1.1x, none)",
    )


if __name__ == "__main__":  # vLLM spawns processes
    sys.exit(main())
