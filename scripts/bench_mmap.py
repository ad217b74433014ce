#!/usr/bin/env python3
"""Memory-mapped loading and pickle-only inspection, stowage against PyTorch, in one run.

usage: bench_mmap.py STOWAGE_BIN [--file F] [--repeat N]
Run with the python that scripts/torch-venv.sh prints. Makes (once) a 1 GiB
checkpoint of 256 float32 1024x1024 tensors, then measures, warm (page cache):
  - torch.load(F, mmap=True), median of N calls in one process (after a warm-up);
  - `stowage bench load F --mmap --repeat N --json` (the library's mmap load);
  - `stowage inspect --no-hash --json F` as a whole process, median of N runs;
and prints one JSON object with the medians and the ratios.
"""
import argparse, json, os, statistics, subprocess, sys, time

import torch


def make(path):
    if os.path.exists(path):
        return
    g = torch.Generator().manual_seed(0)
    torch.save({f"layer{i}.weight": torch.randn(1024, 1024, generator=g) for i in range(256)}, path)


def torch_mmap_load(path, n):
    torch.load(path, mmap=True, weights_only=True)  # warm-up
    times = []
    for _ in range(n):
        t = time.perf_counter()
        torch.load(path, mmap=True, weights_only=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def stowage_mmap_load(binary, path, n):
    out = subprocess.run([binary, "bench", "load", path, "--mmap", "--repeat", str(n), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["median_s"]


def whole_process(args, n):
    subprocess.run(args, check=True, capture_output=True)  # warm-up
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--file", default="/tmp/stowage-bench-1g.pt")
    ap.add_argument("--repeat", type=int, default=21)
    a = ap.parse_args()
    make(a.file)
    torch.set_num_threads(1)
    t_torch = torch_mmap_load(a.file, a.repeat)
    t_stowage = stowage_mmap_load(a.binary, a.file, a.repeat)
    t_inspect = whole_process([a.binary, "inspect", "--no-hash", "--json", a.file], a.repeat)
    t_python = whole_process([sys.executable, "-c", "pass"], 5)
    print(json.dumps({
        "file": a.file,
        "bytes": os.path.getsize(a.file),
        "torch": torch.__version__,
        "torch_load_mmap_median_s": t_torch,
        "stowage_load_mmap_median_s": t_stowage,
        "ratio_mmap_load": t_torch / t_stowage,
        "stowage_inspect_no_hash_process_median_s": t_inspect,
        "python_startup_median_s_for_reference": t_python,
    }, indent=1))


if __name__ == "__main__":
    main()
