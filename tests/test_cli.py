"""The command line prints one clear line for bad input."""

import subprocess
import sys


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], capture_output=True, text=True, timeout=120
    )


def test_unknown_model_is_one_error_line():
    r = _run("generate", "--model", "no-such-model", "hello")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown model 'no-such-model'")


def test_bad_model_path_is_one_error_line(tmp_path):
    r = _run("generate", "--model", str(tmp_path), "hello")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"error: {tmp_path} is not a model directory: it has no config.json"
    ]


def test_wrong_notebook_parameter_is_one_error_line():
    r = _run("run", "00_quickstart", "-p", "max_tokens=4")
    assert r.returncode == 2
    assert r.stderr.strip().startswith(
        "error: notebook 00_quickstart has no parameter 'max_tokens'"
    )


def test_models_lists_the_embedded_default():
    r = _run("models")
    assert r.returncode == 0 and "smollm2-135m-instruct" in r.stdout
