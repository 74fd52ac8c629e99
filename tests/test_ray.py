"""Grids on a local Ray cluster: a worker or the driver killed mid-run loses and duplicates
nothing (that Ray workers give the local executor's rows is tests/test_reproducible.py's, on
the embedded model)."""

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from workbench.experiments import ExperimentConfig, Runner
from workbench.experiments.executors import wait_for
from workbench.testing import save_tiny, tiny_benchmark, tiny_lm

ray = pytest.importorskip("ray")
# A local Ray cluster, workers and drivers killed mid-run: integration, not the fast tier.
pytestmark = pytest.mark.integration
KEY = ["model", "technique", "target", "seed", "question_index", "sample"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(save_tiny(tiny_lm(seed=0), tmp_path_factory.mktemp("tiny")))


def config(model_dir, name, techniques=("base", "zero_shot"), **kw):
    return ExperimentConfig(
        name=name,
        models=(model_dir,),
        techniques=tuple(techniques),
        targets=("river", "scientist", "mountain"),
        n_target=3,
        n_descendant=2,
        n_specificity=2,
        n_unrelated=2,
        max_new_tokens=4,
        batch_size=8,
        **kw,
    )


def test_a_killed_worker_loses_and_duplicates_nothing(tmp_path, ray_cluster, model_dir):
    bench = tiny_benchmark()
    cfg = config(
        model_dir, "k", techniques=("sleepy",), technique_params={"sleepy": {"seconds": 3.0}}
    )
    runner = Runner(
        cfg,
        root=tmp_path,
        bench=bench,
        progress=False,
        executor="ray",
        workers=2,
        threads=1,
        imports=("workbench.testing",),
    )
    started = threading.Event()
    real = runner.started
    runner.started = lambda cell: (started.set(), real(cell))
    killed = []

    def killer():
        started.wait(60)
        assert wait_for(lambda: len(runner.executor.worker_pids) == 2)
        pid = runner.executor.worker_pids[0]
        import time

        time.sleep(1.0)  # mid-cell: the sleepy technique is preparing
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    t = threading.Thread(target=killer)
    t.start()
    table = runner.run()
    t.join()
    assert killed
    assert len(table) == 3 * 9 and not table.duplicated(KEY).any()
    files = list((tmp_path / "k" / "cells").glob("*.jsonl"))
    assert len(files) == 3
    assert sum(len(f.read_text().splitlines()) for f in files) == 3 * 9


DRIVER = """
import sys
from workbench.experiments import ExperimentConfig, Runner
from workbench.testing import tiny_benchmark
cfg = ExperimentConfig.from_dict({cfg})
Runner(cfg, root={root!r}, bench=tiny_benchmark(), progress=False, executor="ray", workers=1,
       threads=1, imports=("workbench.testing",)).run()
"""


def test_a_killed_driver_resumes_where_it_stopped(tmp_path, ray_cluster, model_dir):
    cfg = config(
        model_dir, "d", techniques=("sleepy",), technique_params={"sleepy": {"seconds": 2.0}}
    )
    script = DRIVER.format(cfg=repr(cfg.to_dict()), root=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=str(tmp_path),
        env={**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address},
    )
    cells = tmp_path / "d" / "cells"
    assert wait_for(lambda: cells.is_dir() and len(list(cells.glob("*.jsonl"))) >= 1, timeout=120)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = {f.name for f in cells.glob("*.jsonl")}
    assert 1 <= len(done_before) < 3
    runner = Runner(
        cfg,
        root=tmp_path,
        bench=tiny_benchmark(),
        progress=False,
        executor="ray",
        workers=1,
        threads=1,
        imports=("workbench.testing",),
    )
    computed = []
    real = runner.started
    runner.started = lambda cell: (computed.append(cell), real(cell))
    table = runner.run()
    assert len(computed) == 3 - len(done_before)
    assert len(table) == 3 * 9 and not table.duplicated(KEY).any()
    for f in cells.glob("*.jsonl"):
        assert all(json.loads(line) for line in f.read_text().splitlines())
