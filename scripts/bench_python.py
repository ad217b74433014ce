#!/usr/bin/env python3
"""stowage.load against torch.load(weights_only=True), and stowage.save
against torch.save, side by side.

One .pt of --tensors float32 tensors, --size-mib in all, written by
torch.save; each load runs in a fresh process (so neither side keeps the
other's pages or allocator), the page cache warm for both (the file is read
once first), and the rounds interleave the contenders so that the machine's
noise falls on all of them alike. Prints each contender's median and its
ratio to torch.load's.

usage: $TORCH_PY scripts/bench_python.py [--size-mib 1024] [--tensors 512] [--rounds 5]
(with the package installed from a release wheel: maturin build --release)
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

LOADS = {
    "torch.load": "import torch; t0 = time.perf_counter(); x = torch.load(p, weights_only=True)",
    "torch.load mmap": "import torch; t0 = time.perf_counter(); x = torch.load(p, weights_only=True, mmap=True)",
    "stowage.load": "import torch, stowage; t0 = time.perf_counter(); x = stowage.load(p)",
    "stowage.load mmap": "import torch, stowage; t0 = time.perf_counter(); x = stowage.load(p, mmap=True)",
    "stowage.load numpy": "import stowage; t0 = time.perf_counter(); x = stowage.load(p, framework='numpy')",
    # Saves of the same tensors (loaded first, untimed), neither fsynced, to
    # a name that does not exist yet (the old output removed, untimed):
    # replacing a file is another cost, timed by the "over a file" rows.
    "torch.save": "import torch; x = torch.load(p, weights_only=True); fresh(); t0 = time.perf_counter(); torch.save(x, out)",
    "stowage.save": "import torch, stowage; x = torch.load(p, weights_only=True); fresh(); t0 = time.perf_counter(); stowage.save(x, out, sync=False)",
    "torch.save over a file": "import torch; x = torch.load(p, weights_only=True); t0 = time.perf_counter(); torch.save(x, out)",
    "stowage.save over a file": "import torch, stowage; x = torch.load(p, weights_only=True); t0 = time.perf_counter(); stowage.save(x, out, sync=False)",
}
BASELINE = {
    "torch.save": "torch.save",
    "stowage.save": "torch.save",
    "torch.save over a file": "torch.save over a file",
    "stowage.save over a file": "torch.save over a file",
}


def one(code, path):
    prog = (
        "import os, time, sys\np = sys.argv[1]\nout = p + '.out'\n"
        "def fresh():\n    if os.path.exists(out): os.remove(out)\n"
        f"{code}\nprint(time.perf_counter() - t0)\n"
    )
    out = subprocess.run([sys.executable, "-c", prog, path], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--tensors", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import torch

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.pt")
        per = args.size_mib * 2**20 // 4 // args.tensors
        torch.save({f"layer{i}.weight": torch.randn(per) for i in range(args.tensors)}, path)
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass
        times = {k: [] for k in LOADS}
        for _ in range(args.rounds):
            for name, code in LOADS.items():
                times[name].append(one(code, path))
        print(f"{args.tensors} tensors, {args.size_mib} MiB, {args.rounds} rounds, medians:")
        for name, ts in times.items():
            ref = BASELINE.get(name, "torch.load")
            m = statistics.median(ts)
            base = statistics.median(times[ref])
            print(f"  {name:20s} {m * 1000:9.1f} ms   {base / m:6.2f}x {ref}")


if __name__ == "__main__":
    main()
