"""Benchmark: the same small grid locally and on a local Ray cluster with 1 and 2 workers.

Each executor runs the grid from scratch (its own run directory) with one torch thread per
worker, on the embedded model (a local Ray cluster is started once beforehand; each run starts
its own workers, which load the model); prints cells/s and the 2-worker/1-worker speed-up (target >= 1.6
on 2 cores) and checks that every executor produced exactly the same rows.

    python benchmarks/grid.py [--targets 4] [--questions 8]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch

from workbench.experiments import ExperimentConfig, Runner
from workbench.taxonomy import load_benchmark

KEY = ["model", "technique", "target", "seed", "question_index", "sample"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=int, default=4)
    ap.add_argument("--questions", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    args = ap.parse_args()
    bench = load_benchmark()
    targets = tuple(c.id for c in bench.atomic if bench.atomic.level(c.id) == 2)[: args.targets]
    config = ExperimentConfig(
        name="grid-bench",
        techniques=("base", "zero_shot"),
        targets=targets,
        n_target=args.questions,
        n_descendant=args.questions // 2,
        n_specificity=args.questions // 2,
        n_unrelated=0,
        max_new_tokens=args.max_new_tokens,
        early_stop=False,
    )
    cells = len(config.techniques) * len(targets)
    import ray

    t = time.perf_counter()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}},
    )
    startup = time.perf_counter() - t
    runs = {}
    for name, kwargs in (
        ("local", {}),
        ("ray, 1 worker", {"executor": "ray", "workers": 1, "threads": 1}),
        ("ray, 2 workers", {"executor": "ray", "workers": 2, "threads": 1}),
    ):
        if name == "local":
            torch.set_num_threads(1)
        root = tempfile.mkdtemp(prefix="grid-bench-")
        t = time.perf_counter()
        table = Runner(config, root=root, bench=bench, progress=False, **kwargs).run()
        runs[name] = (time.perf_counter() - t, table.sort_values(KEY).reset_index(drop=True))
    ray.shutdown()
    base = runs["local"][1][KEY + ["response", "refused_phrase"]]
    print(
        f"ray cluster start    {startup:.1f} s (once, not in the times below; each run starts its workers)"
    )
    print(
        f"grid                 {cells} cells ({', '.join(config.techniques)} x {len(targets)} targets), "
        f"{args.questions}+{args.questions // 2}+{args.questions // 2} questions each, 1 thread per worker"
    )
    for name, (seconds, table) in runs.items():
        same = table[KEY + ["response", "refused_phrase"]].equals(base)
        print(
            f"{name:20s} {seconds:6.1f} s = {cells / seconds:.3f} cells/s; rows identical to local: {same}"
        )
    ratio = runs["ray, 1 worker"][0] / runs["ray, 2 workers"][0]
    print(f"speed-up             2 workers / 1 worker = {ratio:.2f}x   (target >= 1.6)")


if __name__ == "__main__":
    main()
