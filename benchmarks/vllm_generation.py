"""The vLLM half of benchmarks/generation.py, run with vLLM's python (.venv-vllm on CPU).

    python benchmarks/vllm_generation.py MODEL DTYPE MAX_NEW_TOKENS

prints one JSON line: load seconds, tokens, seconds and texts of greedy answers to the shared
64 prompts through the workbench's vLLM back end (after a warm-up).
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    from _prompts import PROMPTS
    from workbench.backends import load_model
    from workbench.generation import GenerationConfig, generate

    model, dtype, max_new = sys.argv[1], sys.argv[2], int(sys.argv[3])
    t = time.perf_counter()
    lm = load_model(f"vllm:{model}", dtype=dtype, options={"max_model_len": 1024})
    load_s = time.perf_counter() - t
    generate(lm, PROMPTS[:4], GenerationConfig(max_new_tokens=4), progress=False)  # warm-up
    t = time.perf_counter()
    gens = generate(lm, PROMPTS, GenerationConfig(max_new_tokens=max_new), progress=False)
    seconds = time.perf_counter() - t
    print(
        json.dumps(
            {
                "dtype": lm.dtype_name,
                "load_s": load_s,
                "seconds": seconds,
                "tokens": sum(g.num_tokens for g in gens),
                "texts": [g.text for g in gens],
            }
        )
    )
    lm.close()


if __name__ == "__main__":  # vLLM spawns processes
    main()
