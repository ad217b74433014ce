#!/usr/bin/env python3
"""`stowage convert IN OUT` against `convert IN OUT --manifest FILE`, side by
side (issue 42: `convert --manifest` within 1.1x a plain convert).

Each round runs every form plain, then with the manifest, interleaved, so
that the disk's and the page cache's drift hits both alike; prints the
median wall time of each, the ratio, and the CPU time (user + system) of
each as the kernel counts it, which says what the hashing adds when the
conversion, not the disk, is the bottleneck.

usage: bench_convert_manifest.py STOWAGE_BIN IN OUT_DIR [--rounds N] [--sync]
                                 [--baseline OTHER_BIN] [--forms pt safetensors dcp]
  OUT_DIR: where the outputs go (a tmpfs such as /dev/shm, or a disk);
  --sync: the default convert (synced); without it, --no-sync;
  --baseline: a second build (the head before a change), run alternately
  with STOWAGE_BIN in the same rounds, each with its own rows;
  --forms: only these outputs.
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import time

FORMS = {
    "pt": ("out.pt", []),
    "safetensors": ("out.safetensors", []),
    "dcp": ("out_dcp", ["--to", "dcp"]),
}


def run(cmd):
    """Wall seconds and CPU seconds (children's user + system) of `cmd`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("input")
    p.add_argument("out_dir")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--sync", action="store_true")
    p.add_argument("--baseline")
    p.add_argument("--forms", nargs="+", choices=list(FORMS), default=list(FORMS))
    a = p.parse_args()
    sync = [] if a.sync else ["--no-sync"]
    manifest = os.path.join(a.out_dir, "bench.manifest.json")
    builds = {"": a.binary} if a.baseline is None else {"baseline": a.baseline, "this": a.binary}
    times = {}
    for _ in range(a.rounds):
        for form in a.forms:
            name, extra = FORMS[form]
            out = os.path.join(a.out_dir, name)
            for with_manifest in (False, True):
                for build, binary in builds.items():
                    cmd = [binary, "--quiet", "convert", *sync, a.input, out, *extra]
                    if with_manifest:
                        cmd += ["--manifest", manifest]
                    times.setdefault((form, build, with_manifest), []).append(run(cmd))
                    shutil.rmtree(out, ignore_errors=True)
                    if os.path.exists(out):
                        os.remove(out)
    print(f"{a.input} -> {a.out_dir} ({'synced' if a.sync else '--no-sync'}), medians of {a.rounds}")
    print("| output | convert | --manifest | ratio | CPU plain | CPU --manifest |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for form in a.forms:
        for build in builds:
            plain = statistics.median(w for w, _ in times[(form, build, False)])
            hashed = statistics.median(w for w, _ in times[(form, build, True)])
            cpu_plain = statistics.median(c for _, c in times[(form, build, False)])
            cpu_hashed = statistics.median(c for _, c in times[(form, build, True)])
            label = f"{form} ({build})" if build else form
            print(f"| {label} | {plain * 1000:.0f} ms | {hashed * 1000:.0f} ms | {hashed / plain:.2f}x "
                  f"| {cpu_plain:.2f} s | {cpu_hashed:.2f} s |")


if __name__ == "__main__":
    main()
