"""This machine gives the recorded answers: ``python -m workbench verify``, natively and on
narrower CPU kernels (another machine's stand-in), as a user runs it.

The fixed slice of the main experiment (base, zero-shot, few-shot CoT and steering on the river
target) is rerun from scratch in a fresh process and every answer compared with
``data/reference/verify.json``. Each run is a test of its own, so ``pytest -n`` gives them to
different workers beside the rest of the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("kernels", ["native", "other"])
def test_this_machine_gives_the_recorded_answers(kernels):
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    run = subprocess.run(
        [sys.executable, "-m", "workbench", "verify", "--kernels", kernels],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    report = run.stdout[-4000:] + run.stderr[-2000:]
    assert run.returncode == 0, report
    assert "verify: reproduced:" in run.stdout, report
