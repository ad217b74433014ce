#!/usr/bin/env python3
"""Checkpoint load and save, PyTorch against stowage, in one run (issue 7).

Makes checkpoints with real PyTorch (`torch.save` of a dict of float32 tensors),
then for each one times, one after the other on the same file:

* `torch.load(path)` and `torch.save(obj, out)`: a fresh Python process per
  operation, one untimed warm-up, then the median of N timed calls
  (`time.perf_counter`). The loaded object is dropped between loads (untimed).
  `torch.save` writes over the same file each time, as `stowage bench save` does.
* `torch.load` once in a fresh process (after a tiny warm-up load), because
  PyTorch's steady state reuses the memory glibc kept from the previous load.
* `stowage bench load FILE --repeat N --json`, `stowage bench save ... --json`
  (the library's default, synced save) and `stowage bench save ... --no-sync`.
* the peak RSS of one eager load: `/usr/bin/time -f %M stowage bench load FILE
  --repeat 1` (and of `python -c "torch.load(FILE)"` for reference).

Every file is read once before it is timed, so loads come from the page cache
(`fincore` reports the cached share when it is installed). Saves go to
`--dir/out` (TMPDIR for stowage), on the same file system as the inputs.

Cases: 256 tensors of 64 MiB, 256 MiB, 1 GiB and 4 GiB in all (4 GiB only with
20 GB free, deleted afterwards unless --keep); one 1 GiB tensor; 100,000 tensors
of 10.7 KB (1 GiB in all); the same 100,000 tensors as views of one shared
storage; and 100,000 tensors of 4 floats (metadata only). Prints a table and writes the figures as JSON (`--json-out`).

    /root/.torch-venv/bin/python scripts/bench_checkpoint.py \\
        --stowage $CARGO_TARGET_DIR/release/stowage
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

F32 = 4
GiB = 1 << 30
MiB = 1 << 20

# name, layout, tensor count, total bytes, timed runs
CASES = [
    ("256x 64MiB", "dense", 256, 64 * MiB, 11),
    ("256x 256MiB", "dense", 256, 256 * MiB, 7),
    ("256x 1GiB", "dense", 256, GiB, 5),
    ("256x 4GiB", "dense", 256, 4 * GiB, 3),
    ("1x 1GiB", "dense", 1, GiB, 5),
    ("100000x 1GiB", "dense", 100_000, GiB, 3),
    ("100000x 1GiB shared", "shared", 100_000, GiB, 3),
    ("100000x 16B", "dense", 100_000, 1_600_000, 3),
]

MAKE = r"""
import json, sys, torch
path, layout, count, total = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
numel = total // 4 // count
g = torch.Generator().manual_seed(0)
if layout == "dense":
    sd = {f"layer{i}.weight": torch.rand(numel, generator=g) for i in range(count)}
else:
    base = torch.rand(numel * count, generator=g)
    sd = {f"layer{i}.weight": base[i * numel:(i + 1) * numel] for i in range(count)}
torch.save(sd, path)
print(json.dumps({"bytes": numel * count * 4, "numel": numel}))
"""

TORCH = r"""
import json, os, statistics, sys, time, torch
op, path, out, repeat, tiny = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
times = []
if op == "load":
    x = torch.load(path)
    del x
    for _ in range(repeat):
        t = time.perf_counter()
        x = torch.load(path)
        times.append(time.perf_counter() - t)
        del x
elif op == "load_first":
    torch.load(tiny)
    t = time.perf_counter()
    x = torch.load(path)
    times.append(time.perf_counter() - t)
elif op == "save":
    obj = torch.load(path)
    torch.save(obj, out)
    for _ in range(repeat):
        t = time.perf_counter()
        torch.save(obj, out)
        times.append(time.perf_counter() - t)
    os.remove(out)
print(json.dumps({"median_s": statistics.median(times), "min_s": min(times), "times": times}))
"""


def run(cmd, env=None, timeout=3600):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p


def last_json(text):
    return json.loads(text.strip().splitlines()[-1])


def warm(path):
    """Reads the file once so that the timed runs find it in the page cache."""
    with open(path, "rb", buffering=0) as f:
        while f.read(16 * MiB):
            pass


def cached_share(path):
    if not shutil.which("fincore"):
        return None
    p = subprocess.run(["fincore", "-b", "-n", "-o", "RES", path], capture_output=True, text=True)
    try:
        return int(p.stdout.split()[0]) / os.path.getsize(path)
    except (ValueError, IndexError, ZeroDivisionError):
        return None


def peak_rss_kib(cmd, env=None):
    p = run(["/usr/bin/time", "-f", "%M"] + cmd, env=env)
    return int(p.stderr.strip().splitlines()[-1])


def free_bytes(path):
    return shutil.disk_usage(path).free


def ratio(a, b):
    return a / b if a and b else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stowage", default=None, help="the stowage binary (default: $CARGO_TARGET_DIR or target, release)")
    ap.add_argument("--dir", default="/work/scratch/bench", help="where checkpoints and outputs go")
    ap.add_argument("--only", default=None, help="comma-separated case names to run (default: all)")
    ap.add_argument("--repeat-scale", type=float, default=1.0, help="multiply every case's timed runs")
    ap.add_argument("--keep", action="store_true", help="keep the 4 GiB files")
    ap.add_argument("--json-out", default=None, help="write every figure here (default: DIR/results.json)")
    args = ap.parse_args()

    stowage = args.stowage or os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "stowage")
    if not os.access(stowage, os.X_OK):
        sys.exit(f"no stowage binary at {stowage}: cargo build --release -p stowage-cli")
    os.makedirs(args.dir, exist_ok=True)
    out_dir = os.path.join(args.dir, "out")
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ, TMPDIR=out_dir)
    py = sys.executable

    import torch  # only for the version

    tiny = os.path.join(args.dir, "tiny.pt")
    run([py, "-c", MAKE, tiny, "dense", "2", "64"])

    info = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "stowage": stowage,
        "loadavg_start": os.getloadavg(),
    }
    print(json.dumps(info))
    only = set(args.only.split(",")) if args.only else None
    results = []
    for name, layout, count, total, repeat in CASES:
        if only and name not in only:
            continue
        repeat = max(1, round(repeat * args.repeat_scale))
        path = os.path.join(args.dir, f"{name.replace(' ', '_')}.pt")
        big = total > 2 * GiB
        if big and free_bytes(args.dir) < 20e9 and not os.path.exists(path):
            print(f"skipping {name}: less than 20 GB free in {args.dir}", flush=True)
            continue
        meta_path = path + ".json"
        if not (os.path.exists(path) and os.path.exists(meta_path)):
            t = time.perf_counter()
            meta = last_json(run([py, "-c", MAKE, path, layout, str(count), str(total)]).stdout)
            with open(meta_path, "w") as f:
                json.dump(meta, f)
            print(f"made {path} in {time.perf_counter() - t:.1f} s", flush=True)
        with open(meta_path) as f:
            meta = json.load(f)
        nbytes = meta["bytes"]
        out = os.path.join(out_dir, "torch_out.pt")

        warm(path)
        row = {"case": name, "layout": layout, "tensors": count, "bytes": nbytes,
               "file_bytes": os.path.getsize(path), "repeat": repeat, "cached": cached_share(path),
               "loadavg": os.getloadavg()[0]}

        def torch_op(op, reps=repeat):
            return last_json(run([py, "-c", TORCH, op, path, out, str(reps), tiny]).stdout)

        def stowage_op(*extra):
            return last_json(run([stowage, "bench", *extra, path, "--repeat", str(repeat), "--json"], env=env).stdout)

        row["torch_load"] = torch_op("load")
        row["torch_load_first"] = torch_op("load_first", 1)
        row["stowage_load"] = stowage_op("load")
        row["torch_save"] = torch_op("save")
        row["stowage_save"] = stowage_op("save")
        row["stowage_save_nosync"] = stowage_op("save", "--no-sync")
        row["stowage_load_peak_kib"] = peak_rss_kib([stowage, "bench", "load", path, "--repeat", "1", "--json"], env)
        row["torch_load_peak_kib"] = peak_rss_kib([py, "-c", f"import torch; torch.load({path!r})"])
        row["bound_kib"] = (1.1 * nbytes + 50 * MiB) / 1024
        results.append(row)
        print_row(row, flush=True)
        if big and not args.keep:
            os.remove(path)
            os.remove(meta_path)

    print()
    print_table(results)
    json_out = args.json_out or os.path.join(args.dir, "results.json")
    with open(json_out, "w") as f:
        json.dump({"info": info, "results": results}, f, indent=1)
    print(f"\nfigures in {json_out}")


def print_row(r, flush=False):
    tl, tf, sl = r["torch_load"]["median_s"], r["torch_load_first"]["median_s"], r["stowage_load"]["median_s"]
    ts, ss, sn = r["torch_save"]["median_s"], r["stowage_save"]["median_s"], r["stowage_save_nosync"]["median_s"]
    print(f"{r['case']}: load torch {tl:.3f} s (first in process {tf:.3f}) stowage {sl:.3f} -> {ratio(tl, sl):.2f}x "
          f"({ratio(tf, sl):.2f}x vs first); save torch {ts:.3f} stowage {ss:.3f} -> {ratio(ts, ss):.2f}x, "
          f"no sync {sn:.3f} -> {ratio(ts, sn):.2f}x; peak RSS {r['stowage_load_peak_kib'] / 1024:.0f} MiB "
          f"(bound {r['bound_kib'] / 1024:.0f}); cached {r['cached']}", flush=flush)


def print_table(results):
    head = ("| case | tensor bytes | torch.load | torch.load, first | stowage load | load ratio | ratio vs first "
            "| torch.save | stowage save (sync) | ratio | stowage save, no sync | ratio | stowage peak RSS | bound |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in results:
        tl, tf, sl = r["torch_load"]["median_s"], r["torch_load_first"]["median_s"], r["stowage_load"]["median_s"]
        ts, ss, sn = r["torch_save"]["median_s"], r["stowage_save"]["median_s"], r["stowage_save_nosync"]["median_s"]
        print(f"| {r['case']} | {r['bytes']:,} | {tl:.3f} s | {tf:.3f} s | {sl:.3f} s | {ratio(tl, sl):.2f} | "
              f"{ratio(tf, sl):.2f} | {ts:.3f} s | {ss:.3f} s | {ratio(ts, ss):.2f} | {sn:.3f} s | {ratio(ts, sn):.2f} | "
              f"{r['stowage_load_peak_kib'] / 1024:,.0f} MiB | {r['bound_kib'] / 1024:,.0f} MiB |")


if __name__ == "__main__":
    main()
