#!/usr/bin/env python3
"""PyTorch side of the strided-copy benchmark (crates/stowage/benches/copy.rs).

Times the same operations as the criterion bench, on the same shapes, with
PyTorch on the CPU: warm-up runs, then the median of N runs timed with
time.perf_counter, once with torch.set_num_threads(1) and once with
PyTorch's default thread count. Prints JSON on stdout.

usage: bench_copy_torch.py [--runs N] [--warmup W] [--criterion-dir DIR]

With --criterion-dir (e.g. target/criterion, after
`cargo bench -p stowage --bench copy`), the JSON also carries stowage's
criterion medians (median.point_estimate of each group's `stowage`
benchmark) and the ratios PyTorch time / stowage time (> 1: stowage faster).

GB/s counts bytes read plus bytes written (2 x 64 MiB per call), as the
criterion bench's throughput does.
"""
import argparse, json, os, platform, statistics, sys, time

import torch

N = 4096
NBYTES = N * N * 4  # one 4096x4096 float32 tensor: 64 MiB


def median_s(fn, runs, warmup, inner=1):
    """Median over `runs` samples of the seconds per call of fn (`inner` calls a sample)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples), min(samples), max(samples)


def cases():
    x = torch.arange(N * N, dtype=torch.float32).view(N, N)
    xt = x.t()
    dst = torch.zeros(N, N, dtype=torch.float32)
    cube = torch.arange(256 ** 3, dtype=torch.float32).view(256, 256, 256)
    src_bytes = torch.ones(NBYTES, dtype=torch.uint8)
    out_bytes = torch.zeros(NBYTES, dtype=torch.uint8)
    # name -> (callable, bytes moved per call, inner calls per sample)
    return {
        "transpose_contiguous_4096": (lambda: x.t().contiguous(), 2 * NBYTES, 1),
        "copy_transposed_view": (lambda: dst.copy_(xt), 2 * NBYTES, 1),
        "permute_contiguous_256cubed": (
            lambda: cube.permute(2, 0, 1).contiguous(), 2 * NBYTES, 1),
        # A plain copy of the same bytes: contiguous uint8 -> contiguous uint8.
        "memcpy_64MiB": (lambda: out_bytes.copy_(src_bytes), 2 * NBYTES, 1),
        "contiguous_already": (lambda: x.contiguous(), 0, 10000),
    }


def run(threads, runs, warmup):
    torch.set_num_threads(threads)
    out = {}
    for name, (fn, nbytes, inner) in cases().items():
        med, lo, hi = median_s(fn, runs if inner == 1 else max(5, runs // 3), warmup, inner)
        row = {"median_s": med, "min_s": lo, "max_s": hi, "calls_per_sample": inner}
        if nbytes:
            row["gb_per_s"] = nbytes / med / 1e9
        out[name] = row
    return out


def criterion_medians(d):
    out = {}
    for name in cases():
        p = os.path.join(d, name, "stowage", "new", "estimates.json")
        try:
            with open(p) as f:
                est = json.load(f)
        except FileNotFoundError:
            continue
        med = est["median"]["point_estimate"] / 1e9
        row = {"median_s": med}
        if name != "contiguous_already":
            row["gb_per_s"] = 2 * NBYTES / med / 1e9
        out[name] = row
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--criterion-dir")
    a = ap.parse_args()
    default_threads = torch.get_num_threads()
    res = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "nproc": os.cpu_count(),
        "runs": a.runs,
        "warmup": a.warmup,
        "default_threads": default_threads,
        "torch_1_thread": run(1, a.runs, a.warmup),
        "torch_default_threads": run(default_threads, a.runs, a.warmup),
    }
    torch.set_num_threads(default_threads)
    if a.criterion_dir:
        st = criterion_medians(a.criterion_dir)
        res["stowage"] = st
        res["ratio_torch_over_stowage"] = {
            name: {
                k: res[k][name]["median_s"] / st[name]["median_s"]
                for k in ("torch_1_thread", "torch_default_threads")
            }
            for name in st
        }
    json.dump(res, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
