#!/usr/bin/env bash
# Run a command while holding this checkout's lock: the editable installs of scripts/setup.sh
# and scripts/setup_vllm.sh write the same egg-info folder into the checkout, and `make test`
# runs the two set-ups side by side. Without flock(1) the command runs unlocked.
#
#   bash scripts/checkout_lock.sh COMMAND [ARG...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lock="${TMPDIR:-/tmp}/workbench-checkout-$(printf %s "$root" | sha256sum | cut -c1-16).lock"
if command -v flock >/dev/null 2>&1; then
  exec flock "$lock" "$@"
fi
exec "$@"
