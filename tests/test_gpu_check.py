"""``benchmarks/gpu_check.py``'s default check, run on the CPU as CI runs it: the script that a
lent GPU machine runs is known to work before a GPU ever runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def _run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.mark.integration
def test_the_tiny_models_check_passes_on_the_cpu(tmp_path):
    """Every technique on a tiny Llama-3 and a tiny Gemma-2 (two runs that must agree), and
    the one-copy memory check, each a PASS line in the summary."""
    out = tmp_path / "summary.json"
    done = _run("--device", "cpu", "--families", "llama3,gemma2", "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    checks = json.loads(out.read_text())["checks"]
    assert all(c["ok"] for c in checks.values())
    for family in ("llama3", "gemma2"):
        for technique in ("base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo"):
            assert f"{family}: {technique}, answers on cpu equal the CPU's" in checks
        assert f"{family}: steering gate on cpu equals the CPU's" in checks
    memory = [name for name in checks if "copy" in name]
    assert len(memory) == 2, memory


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_without_a_gpu_the_default_device_is_one_line_and_nothing_runs():
    done = _run(timeout=120)
    assert done.returncode == 2
    assert done.stdout.strip() == (
        "no CUDA device: --device cpu checks the script itself; nothing was run"
    )


def test_an_unknown_family_is_one_line():
    done = _run("--device", "cpu", "--families", "llama3,gpt5", timeout=120)
    assert done.returncode == 2 and done.stdout.strip().startswith("unknown family 'gpt5'")
