#!/usr/bin/env bash
# Builds the Python package's wheel (crates/stowage-py, with maturin), installs
# it into the PyTorch environment of scripts/torch-venv.sh, and runs its pytest
# suite against real PyTorch, then checks its type stubs with mypy's stubtest.
# usage: scripts/ci-python.sh   (STOWAGE_TORCH_PYTHON names the environment's
# python; made with scripts/torch-venv.sh when unset)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/retry.sh
py="${STOWAGE_TORCH_PYTHON:-$(sh scripts/torch-venv.sh)}"
if ! "$py" -c "import maturin, ml_dtypes, pytest, mypy" >/dev/null 2>&1; then
  retry "$py" -m pip install --quiet maturin ml_dtypes pytest mypy >&2
fi
# Two SARIF consumers for `scan(format="sarif")` (tests/test_scan.py): a
# model of the SARIF 2.1.0 schema, and Microsoft's sarif-tools.
if ! "$py" -c "import sarif_pydantic, sarif.loader" >/dev/null 2>&1; then
  retry "$py" -m pip install --quiet sarif-pydantic sarif-tools >&2
fi
# transformers, a real client of what stowage writes and loads
# (tests/test_clients.py: from_pretrained of a tiny model built from a
# config, no network).
if ! "$py" -c "import transformers" >/dev/null 2>&1; then
  retry "$py" -m pip install --quiet transformers >&2
fi
# cryptography, to sign and verify a manifest's OMS statement through DSSE
# with a local key (tests/test_manifest.py).
if ! "$py" -c "import cryptography" >/dev/null 2>&1; then
  retry "$py" -m pip install --quiet cryptography >&2
fi
# JAX and MLX for framework="jax"/"mlx" (tests/test_frameworks.py). MLX's
# Linux wheels are CPU-only and x86-64/aarch64 with glibc 2.35 or newer;
# where none fits, its tests skip, and say so.
if ! "$py" -c "import jax" >/dev/null 2>&1; then
  retry "$py" -m pip install --quiet jax >&2
fi
if ! "$py" -c "import mlx.core" >/dev/null 2>&1; then
  "$py" -m pip install --quiet 'mlx[cpu]' >&2 || echo "ci-python: no MLX wheel for this machine; its tests skip" >&2
fi
out=target/wheels
rm -rf "$out"
"$py" -m maturin build --quiet -m crates/stowage-py/Cargo.toml -i "$py" --out "$out" >&2
"$py" -m pip install --quiet --force-reinstall --no-deps "$out"/stowage-*.whl
# From the tests' folder, so `import stowage` is the installed wheel.
(cd crates/stowage-py/tests && "$py" -m pytest -q -p no:cacheprovider .)
(cd crates/stowage-py && "$py" -m mypy.stubtest stowage)
