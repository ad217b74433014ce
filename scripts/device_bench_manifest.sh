#!/bin/sh
# Issue 42's speed goals on a machine with more cores than this project's
# 2-core VM, in one run: the device machine some sessions are lent (16
# cores, PyTorch in python3, no Rust toolchain, no network). On two cores
# the verified load and `convert --manifest` sit at their CPU bound
# (docs/performance.md, "Issue 42: two tensors hashed at once on each
# core" and "sixteen tensors hashed at once on AVX-512"); with more cores
# the hashing runs beside the load and the writer.
#
# Here, first (the binaries and the wheel travel in the ignored .device/):
#   cargo build --release -p stowage-cli
#   cargo build --release -p stowage --example load_times
#   python3 -m maturin build --release -m crates/stowage-py/Cargo.toml --out .device
#   cp target/release/stowage target/release/examples/load_times .device/
#   cargo bench -p stowage --bench digest --no-run   # prints the bench's path
#   cp target/release/deps/digest-<hash> .device/digest
#   strip .device/stowage .device/load_times .device/digest
# (.device/ is ignored, so it travels only as `carry`, whose limit is 64
# MiB: stripped, the four files are about 26 MB; the bench alone is 51 MB
# with its debug info.)
# Then one device call, carrying .device:
#   sh scripts/device_bench_manifest.sh .device $OUT
# Prints (and writes to OUT/issue42.txt) the cores, `manifest` against its
# floor, verified against plain loads in Rust and Python, and `convert
# --manifest` against a plain convert, each side by side in the one run.
set -eu
BIN=$(cd "$1" && pwd)
OUT=${2:-/tmp/issue42-out}
WORK=${WORK:-/tmp/issue42}
PY=${PYTHON:-python3}
ROUNDS=${ROUNDS:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK" "$OUT"
# Everything goes to OUT/issue42.txt (which comes back even from a run cut
# short), and is printed once the run ends.
exec 3>&1
exec > "$OUT/issue42.txt" 2>&1
trap 'cat "$OUT/issue42.txt" >&3' EXIT

echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
echo "sha_ni: $(grep -c -m1 -w sha_ni /proc/cpuinfo || true)"
# With AVX-512 a process races sixteen lanes against the SHA extensions'
# pairs and hashes with the faster (content/sha256x16.rs).
echo "avx512f, avx512bw: $(grep -c -m1 -w avx512f /proc/cpuinfo || true), $(grep -c -m1 -w avx512bw /proc/cpuinfo || true)"

# The 1 GiB `.pt` of docs/performance.md: 512 float32 tensors of 2 MiB.
if [ ! -f "$WORK/big.pt" ]; then
  "$PY" -c "import torch; torch.manual_seed(0); torch.save({f't{i:03d}': torch.randn(512, 1024) for i in range(512)}, '$WORK/big.pt')"
fi

# The wheel, installed where this run alone sees it.
WHEEL=$(ls "$BIN"/stowage-*.whl 2>/dev/null | head -n 1 || true)
PYFLAG=""
if [ -n "$WHEEL" ]; then
  "$PY" -m pip install -q --no-index --no-deps --target "$WORK/site" --upgrade "$WHEEL"
  export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
  PYFLAG="--python"
fi

echo "== manifest against its floor (and, with the wheel, Python's verified load)"
"$PY" "$HERE/bench_manifest.py" "$BIN/stowage" "$WORK/big.pt" --rounds "$ROUNDS" $PYFLAG

echo "== Rust eager loads, plain and checked against the manifest, alternated"
"$BIN/stowage" --quiet manifest "$WORK/big.pt" -o "$WORK/big.manifest.json"
for _ in $(seq "$ROUNDS"); do
  echo "plain $("$BIN/load_times" "$WORK/big.pt" 5)"
  echo "expect $("$BIN/load_times" "$WORK/big.pt" 5 --expect "$WORK/big.manifest.json")"
done > "$WORK/loads.txt"
"$PY" - "$WORK/loads.txt" <<'EOF'
import json, statistics, sys
times = {}
for line in open(sys.argv[1]):
    kind, doc = line.split(" ", 1)
    times.setdefault(kind, []).extend(json.loads(doc)["seconds"][1:])  # after each process's first
plain, expect = statistics.median(times["plain"]), statistics.median(times["expect"])
print(f"plain {plain * 1000:.0f} ms, with expect {expect * 1000:.0f} ms: {expect / plain:.2f}x (goal 1.3x)")
EOF

echo "== convert --manifest against a plain convert (tmpfs)"
rm -rf /dev/shm/issue42 && mkdir -p /dev/shm/issue42
"$PY" "$HERE/bench_convert_manifest.py" "$BIN/stowage" "$WORK/big.pt" /dev/shm/issue42 --rounds "$ROUNDS"
rm -rf /dev/shm/issue42

# What the hashing threads of a save add, by their number, and to a save
# of many small tensors (the save groups of benches/digest.rs), where the
# bench binary was carried.
if [ -x "$BIN/digest" ]; then
  echo "== a save with its digests on 1, 2 and 4 hashing threads, and on WrittenDigests::new's; 20,000 small tensors"
  (cd "$WORK" && "$BIN/digest" --bench save_ 2>&1 | grep -E "^save|time:")
fi
