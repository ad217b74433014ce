#!/usr/bin/env bash
# Interop checks run by .ci/run after the unit and integration tests.
#  1. check-inspect: `stowage inspect --json` against what real PyTorch reported for
#     every committed fixture (needs only python3).
#  2. check-roundtrip: stowage writes .pt and .safetensors, real PyTorch loads them
#     (weights_only=True); check-inert-roundtrip does the same for the files only
#     inert loading reads (crates/stowage/tests/fixtures/wild). Needs a Python with torch and safetensors: $STOWAGE_TORCH_PYTHON,
#     or ~/.torch-venv/bin/python (made by scripts/torch-venv.sh). Skipped, loudly, without one,
#     unless STOWAGE_REQUIRE_TORCH is set (.ci/run sets it): then it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p stowage-cli
bin="${CARGO_TARGET_DIR:-target}/release/stowage"
python3 scripts/check-inspect "$bin"
py="${STOWAGE_TORCH_PYTHON:-$HOME/.torch-venv/bin/python}"
if [ -x "$py" ] && "$py" -c 'import torch, safetensors' >/dev/null 2>&1; then
  "$py" scripts/check-roundtrip "$bin" 2> >(grep -v -e UserWarning -e '^  ' >&2)
  # Inert loading: whole-model saves, Lightning, numpy, TorchScript, read back by PyTorch.
  "$py" scripts/check-inert-roundtrip "$bin"
  # Checkpoints nobody here wrote, fetched from the package registry.
  bash scripts/wild-checkpoints.sh "$bin" "$py"
elif [ -n "${STOWAGE_REQUIRE_TORCH:-}" ]; then
  echo "FAILED: check-roundtrip needs PyTorch at $py (STOWAGE_REQUIRE_TORCH is set)" >&2
  exit 1
else
  echo "=================================================================" >&2
  echo "SKIPPED: check-roundtrip (no PyTorch environment at $py)." >&2
  echo "Make one with scripts/torch-venv.sh to run it." >&2
  echo "=================================================================" >&2
fi
