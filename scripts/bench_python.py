#!/usr/bin/env python3
"""stowage.load against torch.load(weights_only=True), and stowage.save
against torch.save, side by side.

One .pt of --tensors float32 tensors, --size-mib in all, written by
torch.save, and the same tensors as one .safetensors file; each load runs in a fresh process (so neither side keeps the
other's pages or allocator), the page cache warm for both (the file is read
once first), and the rounds interleave the contenders so that the machine's
noise falls on all of them alike. Prints each contender's median time, its
ratio to its baseline's, and the median of its peak memory over what the
process held when the timed work began (VmHWM against VmRSS at that moment;
not ru_maxrss, which keeps the forking parent's peak across exec).

Then (unless --no-corpus) the detection check: picklescan and stowage.scan
on every file of --corpus (the repository's scanner fixtures, made the way
picklescan's, modelscan's and fickling's test suites make theirs:
scripts/make_scan_fixtures.py, make_scan_field_fixtures.py,
make_hostile.py), listing any file picklescan flags and stowage does not.

usage: $TORCH_PY scripts/bench_python.py [--size-mib 1024] [--tensors 512] [--rounds 5]
(with the package installed from a release wheel: maturin build --release;
the safetensors rows need `safetensors`, the scan rows `picklescan`: pip
install both into the same environment, for the benchmark only)
"""

import argparse
import os
import pathlib
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
    # The same tensors as one .safetensors file.
    "safetensors load_file": "import torch, safetensors.torch as st; t0 = time.perf_counter(); x = st.load_file(s)",
    "stowage.load safetensors": "import torch, stowage; t0 = time.perf_counter(); x = stowage.load(s)",
    # load_file maps the file (safe_open's default): the like-for-like row.
    "stowage.load safetensors mmap": "import torch, stowage; t0 = time.perf_counter(); x = stowage.load(s, mmap=True)",
    # A lazy load reads the pickle only; no storage until used.
    "stowage.load lazy": "import torch, stowage; t0 = time.perf_counter(); x = stowage.load(p, lazy=True)",
    # Scans of the .pt: no tensor is loaded.
    "picklescan": "from picklescan.scanner import scan_file_path; t0 = time.perf_counter(); x = scan_file_path(p)",
    "stowage.scan": "import stowage; t0 = time.perf_counter(); x = stowage.scan(p)",
    # Saves of the same tensors (loaded first, untimed), neither fsynced, to
    # a name that does not exist yet (the old output removed, untimed):
    # replacing a file is another cost, timed by the "over a file" rows.
    "torch.save": "import torch; x = torch.load(p, weights_only=True); fresh(); t0 = time.perf_counter(); torch.save(x, out)",
    "stowage.save": "import torch, stowage; x = torch.load(p, weights_only=True); fresh(); t0 = time.perf_counter(); stowage.save(x, out, sync=False)",
    "torch.save over a file": "import torch; x = torch.load(p, weights_only=True); t0 = time.perf_counter(); torch.save(x, out)",
    "stowage.save over a file": "import torch, stowage; x = torch.load(p, weights_only=True); t0 = time.perf_counter(); stowage.save(x, out, sync=False)",
}
BASELINE = {
    "safetensors load_file": "safetensors load_file",
    "stowage.load safetensors": "safetensors load_file",
    "stowage.load safetensors mmap": "safetensors load_file",
    "picklescan": "picklescan",
    "stowage.scan": "picklescan",
    "torch.save": "torch.save",
    "stowage.save": "torch.save",
    "torch.save over a file": "torch.save over a file",
    "stowage.save over a file": "torch.save over a file",
}


def one(code, path):
    """(seconds, peak bytes over the resident size when timing began)."""
    timed = code.replace(
        "t0 = time.perf_counter()",
        "rss0 = status('VmRSS'); "
        "t0 = time.perf_counter()",
    )
    prog = (
        "import os, time, sys\np = sys.argv[1]\ns = sys.argv[2]\nout = p + '.out'\n"
        "def status(key):\n"
        "    with open('/proc/self/status') as f:\n"
        "        return 1024 * int(next(l for l in f if l.startswith(key + ':')).split()[1])\n"
        "def fresh():\n    if os.path.exists(out): os.remove(out)\n"
        f"{timed}\nt1 = time.perf_counter()\n"
        "print(t1 - t0, status('VmHWM') - rss0)\n"
    )
    st = os.path.splitext(path)[0] + ".safetensors"
    out = subprocess.run([sys.executable, "-c", prog, path, st], capture_output=True, text=True, check=True)
    seconds, peak = out.stdout.strip().splitlines()[-1].split()
    return float(seconds), int(peak)


def corpus_check(corpus):
    """Files picklescan flags (dangerous globals, or a scan error it
    counts as infected) and whether stowage.scan names an unsafe global in
    each; returns the ones stowage misses."""
    import stowage
    from picklescan.scanner import scan_file_path

    flagged, missed, files = 0, [], sorted(p for p in corpus.rglob("*") if p.is_file())
    for f in files:
        try:
            theirs = scan_file_path(str(f))
        except Exception:  # noqa: BLE001 - picklescan gave up on it: not a finding
            continue
        if not theirs.infected_files:
            continue
        flagged += 1
        ours = stowage.scan(f)["files"]
        if not any(g["verdict"] == "unsafe" for r in ours for g in r.get("globals", [])):
            missed.append(str(f.relative_to(corpus)))
    return len(files), flagged, missed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--tensors", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--corpus", default=str(pathlib.Path(__file__).resolve().parents[1] / "crates/stowage/tests/fixtures"))
    ap.add_argument("--no-corpus", action="store_true")
    args = ap.parse_args()
    import torch
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.pt")
        per = args.size_mib * 2**20 // 4 // args.tensors
        tensors = {f"layer{i}.weight": torch.randn(per) for i in range(args.tensors)}
        torch.save(tensors, path)
        save_file(tensors, os.path.join(d, "bench.safetensors"))
        del tensors
        for name in ("bench.pt", "bench.safetensors"):
            with open(os.path.join(d, name), "rb") as f:
                while f.read(1 << 24):
                    pass
        times = {k: [] for k in LOADS}
        for _ in range(args.rounds):
            for name, code in LOADS.items():
                times[name].append(one(code, path))
        print(f"{args.tensors} tensors, {args.size_mib} MiB, {args.rounds} rounds, medians:")
        for name, runs in times.items():
            ref = BASELINE.get(name, "torch.load")
            m = statistics.median(t for t, _ in runs)
            base = statistics.median(t for t, _ in times[ref])
            peak = statistics.median(p for _, p in runs) / 2**20
            print(f"  {name:26s} {m * 1000:9.1f} ms   {base / m:7.2f}x {ref:24s} peak +{peak:7.1f} MiB")
    if not args.no_corpus:
        files, flagged, missed = corpus_check(pathlib.Path(args.corpus))
        print(f"corpus {args.corpus}: {files} files, picklescan flags {flagged}; stowage misses {len(missed)}")
        for m in missed:
            print(f"  missed: {m}")


if __name__ == "__main__":
    main()
