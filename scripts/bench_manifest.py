#!/usr/bin/env python3
"""`stowage manifest FILE` against its floor, in one run (issue 42): the
larger of reading the file (page cache warm, one reader per core, into
reused buffers) and SHA-256 over as many bytes on every core (hashlib,
OpenSSL's SHA extensions, one slice per core; it releases the GIL). With
`--python`, also `stowage.load(FILE, expect=manifest)` against a plain load,
and the manifest of the loaded state dict in memory (`stowage.manifest(sd)`)
against hashlib a tensor at a time (a release wheel first on PYTHONPATH).

usage: bench_manifest.py STOWAGE_BIN FILE [--rounds N] [--python]
"""
import argparse
import hashlib
import os
import statistics
import subprocess
import threading
import time


def timed(f, rounds):
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        f()
        out.append(time.perf_counter() - start)
    return statistics.median(out)


def on_every_core(work, n):
    """Runs work(i, n) for i in 0..n on n threads at once."""
    threads = [threading.Thread(target=work, args=(i, n)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("file")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--python", action="store_true")
    a = p.parse_args()
    size = os.path.getsize(a.file)
    cores = os.cpu_count() or 1
    window = 8 << 20

    def read(i, n):
        fd = os.open(a.file, os.O_RDONLY)
        buf = bytearray(window)
        view = memoryview(buf)
        part = -(-size // n)
        at, end = i * part, min(size, (i + 1) * part)
        while at < end:
            got = os.preadv(fd, [view[: min(window, end - at)]], at)
            if got <= 0:
                break
            at += got
        os.close(fd)

    data = os.urandom(size)

    def sha(i, n):
        part = -(-size // n)
        hashlib.sha256(memoryview(data)[i * part : (i + 1) * part]).digest()

    manifest_cmd = [a.binary, "--quiet", "manifest", a.file, "-o", os.devnull]
    subprocess.run(manifest_cmd, check=True)  # the page cache warm
    read_floor = timed(lambda: on_every_core(read, cores), a.rounds)
    sha_floor = timed(lambda: on_every_core(sha, cores), a.rounds)
    manifest = timed(lambda: subprocess.run(manifest_cmd, check=True), a.rounds)
    floor = max(read_floor, sha_floor)
    print(f"{a.file}: {size / 2**30:.2f} GiB, {cores} cores, medians of {a.rounds}")
    print(f"| work | time | against |")
    print(f"| --- | ---: | --- |")
    print(f"| read the file, {cores} readers | {read_floor * 1000:.0f} ms | |")
    print(f"| SHA-256 of as many bytes, {cores} cores | {sha_floor * 1000:.0f} ms | |")
    print(f"| `stowage manifest` | {manifest * 1000:.0f} ms | {manifest / floor:.2f}x the larger floor |")
    if a.python:
        import stowage

        expect = stowage.manifest(a.file)
        # A first load, not counted: it faults in the process's memory,
        # which the loads after it reuse (1.9 s against 0.3 here).
        stowage.load(a.file)
        plain, checked = [], []
        for _ in range(a.rounds):
            start = time.perf_counter()
            x = stowage.load(a.file)
            plain.append(time.perf_counter() - start)
            del x
            start = time.perf_counter()
            x = stowage.load(a.file, expect=expect)
            checked.append(time.perf_counter() - start)
            del x
        plain, checked = statistics.median(plain), statistics.median(checked)
        print(f"| `stowage.load` | {plain * 1000:.0f} ms | |")
        print(f"| `stowage.load(expect=manifest)` | {checked * 1000:.0f} ms | {checked / plain:.2f}x the plain load |")
        # The state dict in memory: stowage.manifest(obj) against the ten
        # lines of docs/manifest.md (hashlib, a tensor at a time).
        import torch

        sd = stowage.load(a.file)
        assert stowage.manifest(sd)["root_sha256"] == expect["root_sha256"]

        def tensors(v):
            if isinstance(v, torch.Tensor):
                yield v
            elif isinstance(v, dict):
                for x in v.values():
                    yield from tensors(x)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    yield from tensors(x)

        def ten_lines():
            for t in tensors(sd):
                t = t.detach().resolve_conj().resolve_neg().contiguous()
                hashlib.sha256(t.reshape(-1).view(torch.uint8).numpy()).hexdigest()

        in_memory = timed(lambda: stowage.manifest(sd), a.rounds)
        by_hashlib = timed(ten_lines, a.rounds)
        print(f"| `stowage.manifest(state_dict)`, in memory | {in_memory * 1000:.0f} ms | {in_memory / sha_floor:.2f}x the SHA-256 floor |")
        print(f"| hashlib, a tensor at a time (docs/manifest.md's lines) | {by_hashlib * 1000:.0f} ms | {by_hashlib / in_memory:.2f}x `stowage.manifest(state_dict)` |")


if __name__ == "__main__":
    main()
