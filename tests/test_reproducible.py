"""The default settings give the same answers whatever the batch, kernels, executor or resume.

On the embedded model with ``dtype="auto"`` (the reproducible fp32): 64 chat prompts, greedy,
48 tokens, at batch 64 and 16, 8 of them alone (batch 1) and on other CPU kernels in a fresh
process;
SELECT's sampling (T 0.6, top-p 0.9, several seeds) across batch sizes, and a grid run locally,
on Ray workers (one thread each, other batches) and killed with SIGKILL then resumed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from workbench.generation import GenerationConfig, generate
from workbench.models.numerics import other_kernels_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _prompts import PROMPTS  # noqa: E402

pytestmark = pytest.mark.integration

GREEDY = GenerationConfig(max_new_tokens=48)


def answers(lm, prompts, config: GenerationConfig, batch_size: int) -> list[list[int]]:
    cfg = GenerationConfig(**{**config.to_dict(), "batch_size": batch_size})
    return [g.token_ids for g in generate(lm, prompts, cfg, progress=False)]


@pytest.fixture(scope="module")
def batch_64(embedded):
    return answers(embedded, PROMPTS, GREEDY, 64)


def test_default_numerics_are_the_reproducible_ones(embedded):
    assert embedded.dtype_name == "float32" and embedded.numerics == "reproducible"


#: Batch 1 costs a forward pass per token of each prompt (memory-bound: about 5 minutes for all
#: 64 on 2 cores): every eighth prompt by length, from the shortest (the most padded at batch 64)
#: to the longest (``benchmarks/generation.py`` answers all 64 alone, a ``model.generate``
#: call each, and checks them against the engine's).
ALONE = sorted(range(len(PROMPTS)), key=lambda i: (len(PROMPTS[i]), i))[::8]


@pytest.mark.parametrize("batch_size", [16, 1])
def test_greedy_answers_do_not_depend_on_the_batch(embedded, batch_64, batch_size):
    rows = range(len(PROMPTS)) if batch_size > 1 else ALONE
    got = answers(embedded, [PROMPTS[i] for i in rows], GREEDY, batch_size)
    same = sum(a == batch_64[i] for a, i in zip(got, rows))
    assert len(PROMPTS) == 64 and len(rows) >= 8
    assert same == len(rows), f"{same}/{len(rows)} identical at batch {batch_size} vs 64"


WORKER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from _prompts import PROMPTS
from workbench.backends import load_model
from workbench.generation import GenerationConfig, generate
rows = json.loads(sys.argv[2])
lm = load_model("smollm2-135m-instruct", device="cpu")
config = GenerationConfig(max_new_tokens=48, batch_size=len(rows))
gens = generate(lm, [PROMPTS[i] for i in rows], config, progress=False)
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(),
                  "tokens": [g.token_ids for g in gens]}))
"""


def test_greedy_answers_do_not_depend_on_the_cpu_kernels(batch_64):
    """Another machine, stood in for by narrower kernels than this CPU's (AVX2 where it has
    AVX-512, SSE4.2 and scalar ATen kernels where AVX2 is the best it has): the prompts of the
    batch-1 case, shortest to longest (``make test`` also runs the whole verify slice on these
    kernels: tests/test_verify_answers.py)."""
    env = {**os.environ, **other_kernels_env(), "OMP_WAIT_POLICY": "PASSIVE"}
    out = subprocess.run(
        [sys.executable, "-c", WORKER, str(ROOT / "benchmarks"), json.dumps(ALONE)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    import torch

    assert got["capability"] != torch.backends.cpu.get_cpu_capability()
    same = sum(a == batch_64[i] for a, i in zip(got["tokens"], ALONE))
    assert same == len(ALONE), f"{same}/{len(ALONE)} identical under {got['capability']} kernels"


def test_sampled_answers_do_not_depend_on_the_batch(embedded):
    """SELECT's sampling (temperature 0.6, top-p 0.9) with two seeds and three samples each."""
    from workbench.techniques.presets import preset_settings

    s = preset_settings("select")
    for seed in (0, 1):
        cfg = GenerationConfig(
            max_new_tokens=16,
            do_sample=True,
            temperature=s["temperature"],
            top_p=s["top_p"],
            num_samples=3,
            seed=seed,
        )
        prompts = PROMPTS[::8]  # eight prompts of different lengths
        big = answers(embedded, prompts, cfg, 24)
        small = answers(embedded, prompts, cfg, 4)
        assert big == small, f"seed {seed}: {sum(a == b for a, b in zip(big, small))}/24"
        assert len({tuple(t) for t in big}) > 8  # samples of one prompt differ


# -- a grid: local, Ray, killed and resumed --------------------------------------------------------

KEY = ["model", "technique", "target", "seed", "question_index", "sample"]


def grid(name: str, batch_size: int) -> dict:
    """Base model, SELECT's sampling, four cells (two targets, two seeds), 4 questions each
    (two target, a descendant, a sibling or ancestor): batches of 3 split each cell."""
    return {
        "name": name,
        "techniques": ["base"],
        "targets": ["wn:09411430-n", "wn:10560637-n"],
        "seeds": [0, 1],
        "n_target": 2,
        "n_descendant": 1,
        "n_specificity": 1,
        "n_unrelated": 0,
        "max_new_tokens": 16,
        "do_sample": True,
        "temperature": 0.6,
        "top_p": 0.9,
        "batch_size": batch_size,
    }


def answers_of(table: pd.DataFrame) -> pd.DataFrame:
    cols = KEY + ["question", "relation", "response", "refused_phrase", "numerics", "dtype"]
    return table[cols].sort_values(KEY).reset_index(drop=True)


@pytest.fixture(scope="module")
def local_rows(tmp_path_factory):
    from workbench.experiments import ExperimentConfig, Runner

    root = tmp_path_factory.mktemp("runs")
    table = Runner(ExperimentConfig.from_dict(grid("local", 32)), root=root, progress=False).run()
    assert len(table) == 4 * 4 and set(table["numerics"]) == {"reproducible"}
    return answers_of(table)


def test_ray_workers_give_the_local_answers(local_rows, tmp_path, ray_cluster):
    """Two Ray workers, one torch thread each, batches of 3 instead of 32."""
    from workbench.experiments import ExperimentConfig, Runner

    runner = Runner(
        ExperimentConfig.from_dict(grid("ray", 3)),
        root=tmp_path,
        progress=False,
        executor="ray",
        workers=2,
        resources_per_worker={"CPU": 1},
    )
    table = runner.run()
    pd.testing.assert_frame_equal(answers_of(table), local_rows)


def test_a_killed_and_resumed_grid_gives_the_uninterrupted_answers(local_rows, tmp_path):
    """SIGKILL after the first cell is written; the resumed run (batches of 2) does the rest."""
    import yaml

    from workbench.experiments import ExperimentConfig, Runner

    cfg = tmp_path / "grid.yaml"
    cfg.write_text(yaml.safe_dump(grid("killed", 32)))
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", "grid", str(cfg), "--root", str(tmp_path)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    cells = tmp_path / "killed" / "cells"
    deadline = time.time() + 300
    while time.time() < deadline and not list(cells.glob("*.jsonl")):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(list(cells.glob("*.jsonl")))
    assert 1 <= done < 4, done
    runner = Runner(ExperimentConfig.from_dict(grid("killed", 2)), root=tmp_path, progress=False)
    runner.prepare()
    assert len(runner.pending()) == 4 - done  # batch size is not part of a cell's identity
    pd.testing.assert_frame_equal(answers_of(runner.run()), local_rows)
