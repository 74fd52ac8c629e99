"""Runs in the vLLM environment (.venv-vllm): answers a job of tests/test_vllm_backend.py.

    python tests/vllm_worker.py JOB.json OUT.json

The job names a model, generation settings, prompts, LoRA adapter directories and judge pairs;
the output holds the vLLM back end's answers, for the test to compare with the Hugging Face
engine's in the main environment.
"""

import json
import os
import sys
import time


def run_job(script: str, job: dict, directory, timeout: int) -> dict:
    """Test side: write ``job`` under ``directory``, run ``tests/<script>`` with the vLLM
    environment's python on it and return what it wrote; a missing environment or a failed run
    fails the test with the error lines."""
    import os
    import subprocess
    from pathlib import Path

    import pytest

    root = Path(__file__).resolve().parents[1]
    python = root / os.environ.get("WORKBENCH_VLLM_VENV", ".venv-vllm") / "bin" / "python"
    if not python.is_file():
        pytest.fail(
            f"no vLLM environment at {python.parent.parent}: run bash scripts/setup_vllm.sh "
            "(make test does), or deselect with -m 'not vllm'"
        )
    job_path, out_path = Path(directory) / "job.json", Path(directory) / "out.json"
    job_path.write_text(json.dumps(job))
    env = {
        **os.environ,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "PYTHONPATH": str(root),
    }
    proc = subprocess.run(
        [str(python), str(root / "tests" / script), str(job_path), str(out_path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=root,
    )
    if proc.returncode != 0:
        lines = [l for l in proc.stderr.splitlines() if "Error" in l or "error" in l]
        pytest.fail(f"{script} failed (rc {proc.returncode}):\n" + "\n".join(lines)[-3000:])
    return json.loads(out_path.read_text())


def load_in_process(model: str, **kwargs):
    """``load_model(model, **kwargs)`` with vLLM's engine core in this process
    (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): no engine-core and model-worker processes to start,
    each of which imports vLLM and torch again (a start takes about 25 s instead of 60 s on 2
    cores). The answers are the same model runner's; the served tests run vLLM's processes as
    users get them, so the variable is set for this load only."""
    from workbench.backends import load_model

    before = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    try:
        return load_model(model, **kwargs)
    finally:
        if before is None:
            os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        else:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = before


def contains(needle: str | None):
    """A stop predicate both sides build from the job: the text so far contains ``needle``."""
    return None if not needle else (lambda text: needle in text)


def main(job_path: str, out_path: str) -> None:
    from workbench.generation import GenerationConfig, generate
    from workbench.scoring.judge import LLMJudge
    from workbench.techniques.finetune import _ServedAdapter

    with open(job_path) as f:
        job = json.loads(f.read())
    start = time.time()
    lm = load_in_process(
        job["model"],
        dtype=job.get("dtype", "float32"),
        # SFT+DPO: 32 + 32 stacked
        options={"max_model_len": 1024, "max_lora_rank": 64, "adapters": True},
    )
    out = {
        "load_seconds": time.time() - start,
        "dtype": lm.dtype_name,
        "backend": lm.backend,
        "model_id": lm.model_id,
        "revision": lm.revision,
        "runs": {},
    }

    def record(name, gens):
        out["runs"][name] = [
            {
                "text": g.text,
                "finish_reason": g.finish_reason,
                "token_ids": g.token_ids,
                "logprobs": g.logprobs,
            }
            for g in gens
        ]

    for name, run in job["runs"].items():
        config = GenerationConfig(**run["config"])
        target = _ServedAdapter(lm, run["adapter"]) if run.get("adapter") else lm
        stop_when = contains(run.get("stop_when"))
        record(name, generate(target, run["prompts"], config, progress=False, stop_when=stop_when))
    if job.get("techniques"):  # fine-tuned abstainers from artifacts the HF side trained
        from workbench.taxonomy import load_benchmark
        from workbench.techniques import ArtifactStore, get_technique
        from workbench.techniques.base import Technique

        built = []
        original = Technique.prepare

        def no_training(self, *args, **kwargs):  # record a build: the artifacts must be reused
            store = kwargs["store"]
            before = set(store.root.rglob("*"))
            ab = original(self, *args, **kwargs)
            built.extend(
                str(p) for p in set(store.root.rglob("*")) - before if p.name == "meta.json"
            )
            return ab

        Technique.prepare = no_training
        bench, out["techniques"] = load_benchmark(), {}
        for name, params in job["techniques"].items():
            ab = get_technique(name, **params).prepare(
                lm, bench, job["target"], store=ArtifactStore(job["store"])
            )
            gens = ab.generate(
                job["technique_questions"], GenerationConfig(max_new_tokens=24), progress=False
            )
            out["techniques"][name] = {
                "texts": [g.text for g in gens],
                "served": type(ab.adapted).__name__,
            }
        out["built"] = built
    if job.get("judge"):
        verdicts = LLMJudge(lm).judge([tuple(p) for p in job["judge"]])
        out["judge"] = [[v.p_refusal, v.mass, list(v.category_probs)] for v in verdicts]
    try:
        generate(lm, ["hi"], GenerationConfig(max_new_tokens=2), hooks=[object()], progress=False)
    except Exception as e:
        out["hook_error"] = f"{type(e).__name__}: {e}"
    lm.close()
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":  # vLLM spawns processes: the guard is required
    main(sys.argv[1], sys.argv[2])
