"""Benchmark: what reading the gates inside a compiled graph would cost every step.

A compiled steering engine reads its gates in an eager step (the reads are Python), once per
steered pass (benchmarks/steering.py's step table: the gates' step). The alternative, a
gather of the read rows into a persistent buffer at every block inside the compiled graph,
would let that step run compiled, but a graph is the same for every step: every step would pay
the gather, steered or not. This measures that price on the embedded model compiled by
inductor (as vLLM compiles on a CPU): a forward pass of ``n`` tokens with and without a
gather of ``rows`` rows at every block (two row gathers and their sum, as vLLM's blocks return
the block's output and the residual apart), the fastest of ``--repeats`` timings each.

    python benchmarks/gate_reads.py [--rows 64 256] [--tokens 64] [--repeats 20]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import interleaved
from workbench.backends import load_model
from workbench.generation.hooks import decoder_blocks


def timed(fn, repeats: int) -> float:
    """The fastest of ``repeats`` runs of ``fn``, in seconds, after three warm-up runs (the
    first compiles)."""
    for _ in range(3):
        fn()
    [(_, seconds)] = interleaved(repeats, fn)
    return min(seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--rows", type=int, nargs="+", default=[64, 256], help="rows gathered")
    ap.add_argument(
        "--tokens",
        type=int,
        nargs="+",
        default=[64],
        help="tokens per forward pass (64: a "
        "decoding step of 64 requests; a prefill's thousands hide the gather in their noise)",
    )
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    lm = load_model(args.model, device="cpu")
    model = lm.model.eval()
    _, blocks = decoder_blocks(model)
    width = int(model.config.hidden_size)
    print(
        f"model {lm.model_id}: {len(blocks)} blocks of width {width}, "
        f"{torch.get_num_threads()} threads, float32, torch.compile (inductor)"
    )
    state = {"rows": None, "buf": None}

    def gather(module, inputs, output):
        if state["rows"] is None:
            return None
        h = output[0] if isinstance(output, tuple) else output
        residual = inputs[0]  # stands in for vLLM's separate residual: the same shape
        rows = state["rows"]
        got = h[0].index_select(0, rows) + residual[0].index_select(0, rows)
        state["buf"][module._gate_index].copy_(got.float())
        return None

    for i, block in enumerate(blocks):
        block._gate_index = i
        block.register_forward_hook(gather)

    def forward(ids):
        with torch.no_grad():
            return model(input_ids=ids, use_cache=False).logits

    base: dict[int, float] = {}  # tokens -> seconds without a gather
    for rows in [None, *args.rows]:
        torch._dynamo.reset()
        state["rows"] = None if rows is None else torch.zeros(rows, dtype=torch.long)
        state["buf"] = None if rows is None else torch.zeros(len(blocks), rows, width)
        compiled = torch.compile(forward, dynamic=True)
        for n in args.tokens:
            ids = torch.randint(100, 1000, (1, n))
            seconds = timed(lambda c=compiled, i=ids: c(i), args.repeats)
            if rows is None:
                base[n] = seconds
                print(f"{n:>5} tokens, no gather        {1e3 * seconds:8.2f} ms")
            else:
                extra = seconds - base[n]
                print(
                    f"{n:>5} tokens, {rows:>4} rows gathered {1e3 * seconds:8.2f} ms "
                    f"({1e3 * extra:+.2f} ms, {extra / base[n]:+.1%})"
                )


if __name__ == "__main__":
    main()
