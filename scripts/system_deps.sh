#!/usr/bin/env bash
# System packages some tests and rebuilds use (Debian/Ubuntu). Installs only what is missing,
# only when it can (root and apt-get); otherwise says what to install and carries on.
#   wordnet-base   WordNet 3.0 database: rebuilding data/ (python -m workbench taxonomy build)
#   chromium       the browser test that opens JupyterLab (tests/test_browser.py)
#   texlive-latex-recommended  pdflatex with booktabs: the test that compiles the LaTeX tables
#                  (tests/test_tables_latex.py; without it the tables are string-checked only)
set -uo pipefail
missing=()
[ -f /usr/share/wordnet/data.noun ] || [ -n "${WORDNET_DIR:-}" ] || missing+=(wordnet-base)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing+=(chromium)
command -v pdflatex >/dev/null || missing+=(texlive-latex-recommended)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "[setup] installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null 2>&1
    apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1
  } || echo "[setup] could not install ${missing[*]}; the tests that need them will say so"
else
  echo "[setup] optional system packages missing: ${missing[*]} (sudo apt-get install ${missing[*]})"
fi
exit 0
