#!/usr/bin/env python3
"""An eager load against a memcpy and a pread, side by side (issue 23, item 9).

Runs `stowage bench load FILE --repeat N --baselines --json` RUNS times and
prints, for each run, the 1-minute load average before it, the medians of
the load and of each baseline (`copy`: a memcpy into fresh memory;
`copy_touched`: the same into memory written before the rounds, the copy
alone; `read_touched`: pread of FILE into that memory, the kernel's copy
out of the page cache alone; `read`, `read2`: pread of FILE into fresh
memory on one and two threads), and the load's median over each. The runs' JSON goes to
`--json-out` when given.

With several `--stowage` binaries, the runs alternate between them (an
A/B of two builds in the same minutes); a binary without `--baselines`
(older than it) is run without it, and only its load is reported.

How fast the kernel copies FILE out of the page cache depends on the size
of the folios that hold it there (4 KiB pages, or large folios); `--folios`
prints that first (it reads /proc/self/pagemap and /proc/kpageflags: root
only). `--recache` first drops FILE from the page cache
(`posix_fadvise(DONTNEED)`) and reads it back from the disk, so that the
kernel's readahead caches it in large folios where free memory allows; a
copy written 4 KiB at a time (`dd if=FILE of=COPY bs=4k`) is held in
4 KiB pages instead.

FILE is made when missing: `torch.save` of 256 float32 tensors of
1024 x 1024 (1 GiB in all; needs torch: the python `scripts/torch-venv.sh`
prints). It is read once first, so that every load reads the page cache.

    python3 scripts/bench_load_baselines.py --stowage target/release/stowage \\
        --file /tmp/stowage-1g.pt --repeat 21 --runs 3
"""

import argparse
import collections
import json
import mmap
import os
import struct
import subprocess
import sys

NAMES = ["copy", "copy_touched", "read_touched", "read", "read2"]


def make(path, python):
    code = (
        "import sys, torch; torch.manual_seed(0); "
        "torch.save({f'layer{i}.weight': torch.randn(1024, 1024) for i in range(256)}, sys.argv[1])"
    )
    subprocess.run([python, "-c", code, path], check=True)


def folios(path):
    """How the page cache holds `path`: 4 KiB pages, and pages in large folios."""
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    os.close(fd)
    start = None
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.rstrip().endswith(os.path.abspath(path)):
                start = int(line.split("-")[0], 16)
    pages = (size + 4095) // 4096
    for off in range(0, size, 4096):
        m[off]  # map every page (it is in the page cache already)
    counts = collections.Counter()
    with open("/proc/self/pagemap", "rb") as pm, open("/proc/kpageflags", "rb") as kf:
        pm.seek(start // 4096 * 8)
        data = pm.read(8 * pages)
        for i in range(pages):
            entry = struct.unpack_from("<Q", data, 8 * i)[0]
            if not entry >> 63:
                counts["not_present"] += 1
                continue
            kf.seek((entry & ((1 << 55) - 1)) * 8)
            flags = struct.unpack("<Q", kf.read(8))[0]
            # KPF_COMPOUND_HEAD (15), KPF_COMPOUND_TAIL (16)
            counts["large" if flags & (3 << 15) else "4k"] += 1
    m.close()
    return dict(counts)


def bench(binary, path, repeat):
    cmd = [binary, "bench", "load", path, "--repeat", str(repeat), "--json"]
    run = subprocess.run(cmd + ["--baselines"], capture_output=True, text=True)
    if run.returncode == 2 and "--baselines" in run.stderr:
        run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {run.returncode}: {run.stderr.strip()}")
    return json.loads(run.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stowage", action="append", required=True, help="binary (repeatable: A/B)")
    ap.add_argument("--file", default="/tmp/stowage-1g.pt")
    ap.add_argument("--repeat", type=int, default=21, help="rounds per run")
    ap.add_argument("--runs", type=int, default=3, help="runs per binary")
    ap.add_argument("--python", default=sys.executable, help="a python with torch, to make FILE")
    ap.add_argument("--json-out")
    ap.add_argument("--folios", action="store_true", help="print the page cache's folios (root)")
    ap.add_argument("--recache", action="store_true",
                    help="drop FILE from the page cache and read it back first")
    a = ap.parse_args()
    if not os.path.exists(a.file):
        make(a.file, a.python)
    with open(a.file, "rb") as f:
        if a.recache:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        while f.read(64 << 20):
            pass
    if a.folios:
        print(f"{a.file}: pages in the page cache: {folios(a.file)}")
    results = []
    head = "| run | binary | load avg | load | " + " | ".join(NAMES) + " | " + " | ".join(
        f"load / {n}" for n in NAMES) + " |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for run in range(a.runs):
        for binary in a.stowage:
            load_avg = os.getloadavg()[0]
            doc = bench(binary, a.file, a.repeat)
            doc["binary"], doc["load_avg"] = binary, load_avg
            results.append(doc)
            base = doc.get("baselines", {})
            med = [f"{base[n]['median_s']:.3f} s" if n in base else "" for n in NAMES]
            ratio = [f"{base[n]['load_over']:.2f}" if n in base else "" for n in NAMES]
            print(f"| {run + 1} | {binary} | {load_avg:.1f} | {doc['median_s']:.3f} s | "
                  + " | ".join(med) + " | " + " | ".join(ratio) + " |", flush=True)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
