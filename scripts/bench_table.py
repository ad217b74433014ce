#!/usr/bin/env python3
"""The load table of issue 41 in one run: stowage (Rust and Python), torch,
safetensors and the floors, warm and cold, side by side.

    python3 scripts/bench_table.py --pt big.pt --safetensors big.safetensors \\
        --dcp dcp1g --many many.pt [--wide many300k.pt] [--rounds 5] \\
        [--stowage target/release/stowage] \\
        [--example target/release/examples/load_times] [--python PY]

Builds nothing: `cargo build --release -p stowage-cli -p stowage --example
load_times`, and a release wheel for PY (`maturin build --release`; the
wheel `scripts/ci-python.sh` builds is a debug build). PY defaults to
`$STOWAGE_TORCH_PYTHON`, the interpreter with torch, safetensors and stowage.

Every figure is a median over `--rounds`:
- warm: the file read once before; Rust is `stowage bench load` (loads
  after a warm-up, in one process), Python and torch time a load in a fresh
  process (the first of the process) and the loads after it;
- cold: the file's pages dropped from the page cache first
  (`posix_fadvise(DONTNEED)`, no root needed), then one load in a fresh
  process; torch is imported before the timer;
- floors: `preadv` of the file into fresh memory on two threads, 4 KiB
  pages and advised huge pages (`scripts/bench_huge_pages.py`'s), warm and
  cold;
- `--wide` (a `.pt` of 300,000 small tensors): the Rust load against
  `stowage inspect --no-hash --json` and `stowage inspect`, each a whole
  process (its start and its exit included), the output to `/dev/null`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# One load timed in a fresh process, then `n - 1` more in it.
_PY_LOAD = r"""
import sys, time, json
kind, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
import torch
if kind.startswith("stowage"):
    import stowage
    load = {"stowage": lambda: stowage.load(path),
            "stowage-mmap": lambda: stowage.load(path, mmap=True)}[kind]
elif kind == "torch":
    load = lambda: torch.load(path, weights_only=True)
elif kind == "torch-mmap":
    load = lambda: torch.load(path, weights_only=True, mmap=True)
else:
    import safetensors.torch
    load = lambda: {k: v.clone() for k, v in safetensors.torch.load_file(path).items()}
times = []
for _ in range(n):
    t = time.perf_counter(); x = load(); times.append(time.perf_counter() - t); del x
print(json.dumps(times))
"""


def drop(path):
    """Drops `path`'s pages (every file under it) from the page cache."""
    paths = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def warm(path):
    paths = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
    for p in paths:
        with open(p, "rb") as f:
            while f.read(16 << 20):
                pass


def python_times(py, kind, path, n):
    out = subprocess.run([py, "-c", _PY_LOAD, kind, path, str(n)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def rust_bench(stowage, path, rounds, mmap=False):
    cmd = [stowage, "bench", "load", path, "--repeat", str(rounds), "--json"] + (["--mmap"] if mmap else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["median_s"]


def rust_first(example, path):
    out = subprocess.run([example, path, "1"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["seconds"][0]


def floor(py, path, huge, n):
    out = subprocess.run([py, os.path.join(HERE, "bench_huge_pages.py"), path, "--floor",
                          "floor-huge" if huge else "floor-4k", "--loads", str(n)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pt")
    p.add_argument("--safetensors")
    p.add_argument("--dcp")
    p.add_argument("--many")
    p.add_argument("--wide")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--stowage", default="target/release/stowage")
    p.add_argument("--example", default="target/release/examples/load_times")
    p.add_argument("--python", default=os.environ.get("STOWAGE_TORCH_PYTHON", sys.executable))
    args = p.parse_args()
    med = statistics.median
    rows = []

    def row(work, **cells):
        rows.append((work, cells))
        print(f"{work}: " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in cells.items()), flush=True)

    for label, path, kinds in [
        ("1 GiB .pt", args.pt, ["stowage", "torch"]),
        ("1 GiB .safetensors", args.safetensors, ["stowage", "safetensors"]),
        ("1 GiB DCP folder", args.dcp, ["stowage"]),
        ("20,000 tensors .pt", args.many, ["stowage", "torch"]),
    ]:
        if not path:
            continue
        warm(path)
        cells = {"Rust": rust_bench(args.stowage, path, args.rounds)}
        for kind in kinds:
            first, later = [], []
            for _ in range(args.rounds):
                times = python_times(args.python, kind, path, 3)
                first.append(times[0])
                later.extend(times[1:])
            name = "Python" if kind == "stowage" else kind
            cells[f"{name} first"] = med(first)
            cells[f"{name} later"] = med(later)
        if os.path.isfile(path) and label != "20,000 tensors .pt":
            cells["floor 4k"] = med([t for _ in range(args.rounds) for t in floor(args.python, path, False, 2)[1:]])
            cells["floor huge"] = med([t for _ in range(args.rounds) for t in floor(args.python, path, True, 2)[1:]])
        row(f"eager, warm, {label}", **cells)
    if args.wide:
        warm(args.wide)

        def process(*cmd):
            t = time.perf_counter()
            subprocess.run([args.stowage, *cmd, args.wide], check=True, stdout=subprocess.DEVNULL)
            return time.perf_counter() - t

        row("300,000 tensors .pt", **{
            "Rust": rust_bench(args.stowage, args.wide, args.rounds),
            "inspect --no-hash --json": med([process("inspect", "--json", "--no-hash") for _ in range(args.rounds)]),
            "inspect": med([process("inspect") for _ in range(args.rounds)]),
        })
    if args.pt:
        cells = {}
        for kind, f in [
            ("Rust", lambda: rust_first(args.example, args.pt)),
            ("Python", lambda: python_times(args.python, "stowage", args.pt, 1)[0]),
            ("torch", lambda: python_times(args.python, "torch", args.pt, 1)[0]),
            ("floor 4k", lambda: floor(args.python, args.pt, False, 1)[0]),
        ]:
            times = []
            for _ in range(args.rounds):
                drop(args.pt)
                times.append(f())
            cells[kind] = med(times)
        row("eager, cold, 1 GiB .pt", **cells)
    for label, path in [("1 GiB .pt", args.pt), ("20,000 tensors .pt", args.many)]:
        if not path:
            continue
        warm(path)
        cells = {"Rust": rust_bench(args.stowage, path, args.rounds, mmap=True)}
        for kind, name in [("stowage-mmap", "Python"), ("torch-mmap", "torch")]:
            cells[name] = med([t for _ in range(args.rounds) for t in python_times(args.python, kind, path, 3)[1:]])
        row(f"mmap, {label}", **cells)
    print()
    print("| work | " + " | ".join(sorted({k for _, c in rows for k in c}, key=str)) + " |")
    keys = sorted({k for _, c in rows for k in c}, key=str)
    print("| --- |" + " ---: |" * len(keys))
    for work, cells in rows:
        print(f"| {work} | " + " | ".join(f"{cells[k] * 1e3:.0f} ms" if k in cells else "" for k in keys) + " |")


if __name__ == "__main__":
    main()
