"""Where steering inside vLLM and the engine differ: bf16, run with vLLM's python (.venv-vllm).

    python benchmarks/steering_bf16.py [N_PROMPTS]

Prepares the river abstainer (cached artifacts), answers the first N of the shared prompts
(default 16) greedily in bf16 on the workbench's engine and inside vLLM, and prints one JSON
line: how many gate decisions and how many steered answers (token for token) agree. In fp32 both
are all of them (tests/test_vllm_steering.py, benchmarks/steering.py); in bf16 the two engines'
kernels round differently, as they do unsteered.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    from _prompts import PROMPTS
    from workbench.backends import load_model
    from workbench.generation import GenerationConfig
    from workbench.steering.conditional import steerer_of
    from workbench.taxonomy import load_benchmark
    from workbench.techniques import get_technique

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    prompts, cfg = PROMPTS[:n], GenerationConfig(max_new_tokens=48)
    spec = get_technique("steering").prepare(load_model(), load_benchmark(), "wn:09411430-n").spec()
    hf = load_model("smollm2-135m-instruct", dtype="bfloat16")
    steerer = steerer_of(spec)
    engine = steerer.generate(hf, prompts, cfg, progress=False)
    engine_fired = steerer.last_decisions.tolist()
    v = load_model("vllm:smollm2-135m-instruct", dtype="bfloat16", options={"max_model_len": 1024})
    gens, records = v.generate_steered(prompts, cfg, [spec] * n, progress=False)
    fired = [bool(r["fired"]) for r in records]
    v.close()
    print(
        json.dumps(
            {
                "prompts": n,
                "decisions_equal": sum(a == b for a, b in zip(engine_fired, fired)),
                "fired": sum(fired),
                "answers_equal": sum(a.token_ids == b.token_ids for a, b in zip(engine, gens)),
            }
        )
    )


if __name__ == "__main__":  # vLLM spawns processes
    main()
