"""The GPU path, checked end to end on the embedded model (run it where a CUDA GPU is lent).

1. A small grid with every technique (base, zero_shot, few_shot_cot, steering, sft, sft_dpo) on
   the Hugging Face engine on CUDA (bf16, ``dtype="auto"``), locally and on a local Ray cluster
   with one GPU worker: the two give the same rows.
2. The same black-box and fine-tuning cells on the vLLM back end in process
   (``vllm:smollm2-135m-instruct``; adapters served over the base weights), compared with the
   engine's answers in the same dtype.
3. The judge on vLLM against the engine's.

Prints one line per check (PASS / FAIL with numbers) and a JSON summary for the README; exits 1
if a check fails. Needs vLLM in this environment (``pip install -e ".[vllm]"``) for 2 and 3.

    python benchmarks/gpu_check.py [--questions 6] [--json gpu_check.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time

KEY = ["model", "technique", "target", "seed", "question_index", "sample"]
TECHNIQUES = ("base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=6)
    ap.add_argument("--target", default="wn:09411430-n")
    ap.add_argument("--json", default=None)
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--skip-vllm", action="store_true")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: this script checks the GPU path; nothing was run")
        return 2
    from workbench.experiments import ExperimentConfig, Runner
    from workbench.taxonomy import load_benchmark

    bench = load_benchmark()
    summary = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "checks": {},
    }
    failed = False

    def check(name, ok, detail):
        nonlocal failed
        failed |= not ok
        summary["checks"][name] = {"ok": bool(ok), "detail": detail}
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)

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
        set(local["technique"]) == set(TECHNIQUES) and set(local["dtype"]) == {"bfloat16"},
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
            "techniques": ("base", "zero_shot", "few_shot_cot", "sft", "sft_dpo"),
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
            "(bf16 kernels differ: a few may differ)",
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
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":  # vLLM spawns processes
    sys.exit(main())
