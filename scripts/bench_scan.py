#!/usr/bin/env python3
"""`stowage scan` of one build against another, side by side in one run.

usage: bench_scan.py OLD_BINARY NEW_BINARY [--runs N] [--dir DIR]

Workloads (made once in DIR with real PyTorch, `$TORCH_PY` or this python):
  many_tensors.pt  torch.save of 4,000 tensors (about 128 MiB): one pickle,
                   4,000 data records, each of which a scan now looks at
  fixtures/        the repository's test fixtures, recursively (hundreds of
                   small files of every kind)
Each run alternates the two binaries, so both see the same machine; the
medians and their ratio (new / old) are printed. The page cache is warm
(each workload is scanned once before timing).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def make(dir):
    os.makedirs(dir, exist_ok=True)
    big = os.path.join(dir, "many_tensors.pt")
    if not os.path.exists(big):
        import torch
        torch.manual_seed(0)
        torch.save({f"layer{i}.weight": torch.randn(8192) for i in range(4000)}, big)
    return [("many_tensors.pt", [big]),
            ("fixtures/", [os.path.join(HERE, "..", "crates", "stowage", "tests", "fixtures")])]


def timed(binary, paths):
    t = time.perf_counter()
    r = subprocess.run([binary, "scan", "--json", *paths], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if r.returncode not in (0, 1, 2):
        sys.exit(f"{binary} exited {r.returncode}")
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--dir", default="/tmp/stowage-bench-scan")
    a = ap.parse_args()
    for name, paths in make(a.dir):
        for b in (a.old, a.new):
            timed(b, paths)
        old, new = [], []
        for _ in range(a.runs):
            old.append(timed(a.old, paths))
            new.append(timed(a.new, paths))
        mo, mn = statistics.median(old), statistics.median(new)
        print(f"{name:18} old {mo * 1000:8.1f} ms   new {mn * 1000:8.1f} ms   new/old {mn / mo:5.2f}")


if __name__ == "__main__":
    main()
