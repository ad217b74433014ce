#!/usr/bin/env python3
"""Time and peak memory of the CLI on a large checkpoint (docs/performance.md,
"The command line on a 2 GiB checkpoint").

usage: bench_cli.py STOWAGE_BIN [--dir DIR] [--repeat N]
Run it with the python that scripts/torch-venv.sh prints. It writes, once, into
DIR (default /tmp/stowage-bench-cli, about 4.3 GiB):
  big.pt   {"model": 64 float32 tensors of 2048x4096 (32 MiB each), "epoch": 3,
            "config": {"lr": 1e-3, "name": "gpt"}}, 2 GiB, by torch.save;
  big2.pt  the same with one tensor changed by 1e-4 and "epoch": 4.
Then runs each command under /usr/bin/time -v (peak resident set size) and
times it (median of N runs, N=11 for the quick ones), and prints a table.
"""
import argparse, os, re, statistics, subprocess, sys, time

def make(d):
    import torch
    big, big2 = os.path.join(d, "big.pt"), os.path.join(d, "big2.pt")
    if os.path.exists(big) and os.path.exists(big2):
        return big, big2
    g = torch.Generator().manual_seed(0)
    sd = {f"layers.{i}.weight": torch.randn(2048, 4096, generator=g) for i in range(64)}
    torch.save({"model": sd, "epoch": 3, "config": {"lr": 1e-3, "name": "gpt"}}, big)
    sd["layers.7.weight"] = sd["layers.7.weight"] + 1e-4
    torch.save({"model": sd, "epoch": 4, "config": {"lr": 1e-3, "name": "gpt"}}, big2)
    return big, big2

def peak_rss_mib(cmd):
    r = subprocess.run(["/usr/bin/time", "-v", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    return int(m.group(1)) / 1024, r.returncode

def median_s(cmd, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--dir", default="/tmp/stowage-bench-cli")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    big, big2 = make(a.dir)
    with open(big, "rb") as f:  # warm the page cache
        while f.read(1 << 24):
            pass
    out_pt, out_st = os.path.join(a.dir, "out.pt"), os.path.join(a.dir, "out.safetensors")
    cases = [
        (["inspect", big], 11),
        (["inspect", big, "--json", "--no-hash"], 11),
        (["inspect", big, "--json"], a.repeat),
        (["diff", big, big2], a.repeat),
        (["verify", big], a.repeat),
        (["convert", big, out_pt], a.repeat),
        (["convert", big, out_st], a.repeat),
    ]
    print("| command | median wall clock | peak RSS | exit |")
    print("| --- | --- | --- | --- |")
    for args, n in cases:
        cmd = [a.binary, *args]
        rss, rc = peak_rss_mib(cmd)
        t = median_s(cmd, n)
        shown = " ".join(os.path.basename(x) if os.sep in x else x for x in args)
        print(f"| `stowage {shown}` | {t * 1000:.1f} ms | {rss:.1f} MiB | {rc} |", flush=True)
    for p in (out_pt, out_st):
        if os.path.exists(p):
            os.remove(p)

if __name__ == "__main__":
    sys.exit(main())
