#!/usr/bin/env python3
"""Eager loads with and without transparent huge pages, beside the floors,
each in fresh processes: `bench_huge_pages.py FILE [--rounds R] [--loads N]
[--load CHECKPOINT]`.

The floors read FILE; the loads load FILE, or CHECKPOINT where given (a
folder whose bytes FILE holds: a DCP folder's data file as FILE).

Builds nothing: run `cargo build --release -p stowage --example load_times`
first. Each round runs, in an order that rotates from round to round, four
fresh processes that each do N of one thing and print every time, the
first of the process included:

- `floor-4k`: `preadv` of FILE's whole 2 MiB pages into a fresh anonymous
  mapping (4 KiB pages), on two threads, each reading one half in 16 MiB
  pieces, as the loader reads;
- `floor-huge`: the same into a mapping aligned to 2 MiB and advised
  `MADV_HUGEPAGE` before the first write;
- `load`: `stowage::load_with` (`examples/load_times.rs`);
- `load-huge`: the same with `LoadOptions::with_huge_pages(true)`.

Prints, per thing, the median over the rounds of the first time of a
process and of the later ones, and each over `floor-huge`'s.
"""

import argparse
import ctypes
import json
import mmap
import os
import statistics
import subprocess
import sys
import threading
import time

HUGE = 2 << 20
PIECE = 16 << 20
MADV_HUGEPAGE = 14


def floor(path, n_loads, huge):
    """The floor in this process: N reads into fresh memory, each timed."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    size = os.path.getsize(path) // HUGE * HUGE
    fd = os.open(path, os.O_RDONLY)
    times = []
    for _ in range(n_loads):
        start = time.perf_counter()
        # Private, as a load's memory is (a shared mapping is shmem, with
        # huge pages of its own policy).
        region = mmap.mmap(-1, size + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        base = ctypes.addressof(ctypes.c_char.from_buffer(region))
        skip = (base + HUGE - 1) // HUGE * HUGE - base
        if huge:
            libc.madvise(ctypes.c_void_p(base + skip), ctypes.c_size_t(size), MADV_HUGEPAGE)
        view = memoryview(region)[skip : skip + size]

        def read(a, b):
            while a < b:
                k = min(PIECE, b - a)
                os.preadv(fd, [view[a : a + k]], a)
                a += k

        other = threading.Thread(target=read, args=(size // 2, size))
        other.start()
        read(0, size // 2)
        other.join()
        times.append(time.perf_counter() - start)
        view.release()
        region.close()
    os.close(fd)
    print(json.dumps({"seconds": times}))


def run(kind, args):
    if kind in ("floor-4k", "floor-huge"):
        cmd = [sys.executable, __file__, args.file, "--floor", kind, "--loads", str(args.loads)]
    else:
        cmd = [args.example, args.load or args.file, str(args.loads)]
        cmd += ["--huge-pages"] if kind == "load-huge" else []
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["seconds"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--loads", type=int, default=3)
    p.add_argument("--example", default="target/release/examples/load_times")
    p.add_argument("--floor", choices=["floor-4k", "floor-huge"])
    p.add_argument("--load", help="the checkpoint the loads load (default: FILE)")
    args = p.parse_args()
    if args.floor:
        return floor(args.file, args.loads, args.floor == "floor-huge")
    kinds = ["floor-4k", "floor-huge", "load", "load-huge"]
    first = {k: [] for k in kinds}
    later = {k: [] for k in kinds}
    for r in range(args.rounds):
        for i in range(len(kinds)):
            kind = kinds[(i + r) % len(kinds)]
            times = run(kind, args)
            first[kind].append(times[0])
            later[kind].extend(times[1:])
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    base_first, base_later = med(first["floor-huge"]), med(later["floor-huge"])
    print(f"{'':12} {'first (ms)':>11} {'/ floor-huge':>13} {'later (ms)':>11} {'/ floor-huge':>13}")
    for k in kinds:
        f, l = med(first[k]), med(later[k])
        print(f"{k:12} {f * 1e3:11.0f} {f / base_first:13.2f} {l * 1e3:11.0f} {l / base_later:13.2f}")
    print(json.dumps({"first_s": first, "later_s": later}))


if __name__ == "__main__":
    main()
