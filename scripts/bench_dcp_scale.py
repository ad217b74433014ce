#!/usr/bin/env python3
"""DCP `.metadata` at training scale (issue 44, item 4): PyTorch's reader
against stowage's, on folders laid out as `FileSystemWriter` lays them out.

usage: $TORCH_PY scripts/bench_dcp_scale.py WORKDIR --stowage BIN
           [--chunks 10000 128000 1280000] [--ranks 64] [--rounds 3]

For each chunk count C, makes WORKDIR/dcp-C once: C / RANKS tensors of
float32, each row-sharded over RANKS ranks (a real
`torch.distributed.checkpoint.metadata.Metadata`, pickled as
`FileSystemWriter.finish` pickles it), and one data file per rank,
`__R_0.distcp`. Rank 0's file holds its chunks as `FileSystemWriter`
writes them (a `torch.save` archive each); the others are sparse at the
length the metadata gives them (no disk cost; never read). Then, each
round, in fresh processes:
- `FileSystemReader(dir).read_metadata()` (PyTorch);
- `stowage.dcp.StorageReader(dir).read_metadata()` (the Python package);
- `BIN inspect --no-hash --json dir` (reads `.metadata` only);
- `BIN verify dir`: the metadata, every item's bounds and rank 0's
  archives' checksums (it then reports the sparse ranks' items: exit 1);
- rank 0's read of its shard: the `LoadPlan` a rank-0 planner makes for
  row 0 of every tensor, through each reader's `read_data` (timed without
  `read_metadata`, which has its row), checked against what was saved.
Prints each median wall time and peak resident memory (/usr/bin/time for
the command, `ru_maxrss` for the Python readers, torch imported before the
timer), with the `.metadata` size.

(With the package installed from a release wheel: maturin build --release.)
"""

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import time

COLS = 16  # floats per row: each chunk is ROWS x COLS


def make(d, tensors, ranks):
    """A DCP folder of `tensors` tensors, each of `ranks` chunks of one row."""
    import io

    import torch
    from torch.distributed.checkpoint.filesystem import _StorageInfo
    from torch.distributed.checkpoint.metadata import (
        ChunkStorageMetadata,
        Metadata,
        MetadataIndex,
        TensorProperties,
        TensorStorageMetadata,
    )

    os.makedirs(d, exist_ok=True)
    chunk_bytes = COLS * 4
    state, storage = {}, {}
    ends = [0] * ranks
    rank0 = []
    for i in range(tensors):
        fqn = f"layers.{i}.weight"
        chunks = []
        for r in range(ranks):
            offsets, sizes = torch.Size([r, 0]), torch.Size([1, COLS])
            chunks.append(ChunkStorageMetadata(offsets=offsets, sizes=sizes))
            length = chunk_bytes
            if r == 0:
                item = io.BytesIO()
                torch.save(row0(i), item)
                rank0.append(item.getvalue())
                length = len(rank0[-1])
            storage[MetadataIndex(fqn, offsets)] = _StorageInfo(f"__{r}_0.distcp", ends[r], length)
            ends[r] += length
        state[fqn] = TensorStorageMetadata(
            properties=TensorProperties(dtype=torch.float32),
            size=torch.Size([ranks, COLS]),
            chunks=chunks,
        )
    metadata = Metadata(state_dict_metadata=state, storage_data=storage)
    with open(os.path.join(d, ".metadata.tmp"), "wb") as f:
        pickle.dump(metadata, f)
    for r in range(ranks):
        with open(os.path.join(d, f"__{r}_0.distcp"), "wb") as f:
            if r == 0:
                f.write(b"".join(rank0))
            f.truncate(ends[r])
    os.rename(os.path.join(d, ".metadata.tmp"), os.path.join(d, ".metadata"))


def row0(i):
    """Rank 0's row of tensor `i`, as saved."""
    import torch

    return torch.arange(COLS, dtype=torch.float32).reshape(1, COLS) + i


def read_shard_in_child(kind, d):
    """One timed read of rank 0's shard (row 0 of every tensor), through
    the reader's `read_data`, with a `DefaultLoadPlanner` as rank 0's."""
    import resource

    import torch
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
    from torch.distributed.checkpoint.metadata import MetadataIndex
    from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, ReadItem

    if kind == "torch":
        from torch.distributed.checkpoint import FileSystemReader as Reader
    else:
        from stowage.dcp import StorageReader as Reader
    reader = Reader(d)
    md = reader.read_metadata()
    names = sorted(md.state_dict_metadata, key=lambda n: int(n.split(".")[1]))
    state = {n: torch.empty(1, COLS) for n in names}
    zero, lengths = torch.Size([0, 0]), torch.Size([1, COLS])
    items = [ReadItem(type=LoadItemType.TENSOR, dest_index=MetadataIndex(n, zero), dest_offsets=zero,
                      storage_index=MetadataIndex(n, zero), storage_offsets=zero, lengths=lengths)
             for n in names]
    t0 = time.perf_counter()
    reader.set_up_storage_reader(md, True)
    planner = DefaultLoadPlanner()
    planner.set_up_planner(state, md, True)
    plan = reader.prepare_local_plan(LoadPlan(items))
    reader.read_data(plan, planner).wait()
    seconds = time.perf_counter() - t0
    for i, n in enumerate(names):
        assert torch.equal(state[n], row0(i)), n
    print(seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, len(items))


def read_in_child(kind, d):
    """One timed `read_metadata` (run in a fresh process)."""
    import resource

    import torch  # noqa: F401 - imported before the timer, as a training job has it

    if kind == "torch":
        from torch.distributed.checkpoint import FileSystemReader as Reader
    else:
        from stowage.dcp import StorageReader as Reader
    t0 = time.perf_counter()
    md = Reader(d).read_metadata()
    seconds = time.perf_counter() - t0
    chunks = sum(len(v.chunks) for v in md.state_dict_metadata.values() if hasattr(v, "chunks"))
    print(seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, chunks)


def run_python(kind, d, child="--child"):
    out = subprocess.run([sys.executable, __file__, child, kind, d], capture_output=True, text=True)
    if out.returncode != 0:
        return None, None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"
    seconds, peak, _ = out.stdout.split()
    return float(seconds), float(peak), None


def run_inspect(binary, d, command=("inspect", "--no-hash", "--json"), ok=(0,)):
    t0 = time.perf_counter()
    out = subprocess.run(["/usr/bin/time", "-f", "%M", binary, *command, d],
                         capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if out.returncode not in ok:
        return None, None, out.stderr.strip().splitlines()[0]
    return seconds, int(out.stderr.strip().splitlines()[-1]) / 1024, None


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        read_in_child(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--shard-child":
        read_shard_in_child(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--stowage", required=True)
    ap.add_argument("--chunks", type=int, nargs="+", default=[10_000, 128_000, 1_280_000])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for chunks in args.chunks:
        d = os.path.join(args.work, f"dcp-{chunks}-rank0")
        if not os.path.exists(os.path.join(d, ".metadata")):
            make(d, max(1, chunks // args.ranks), args.ranks)
        size = os.path.getsize(os.path.join(d, ".metadata"))
        rows = {"FileSystemReader.read_metadata": lambda: run_python("torch", d),
                "StorageReader.read_metadata": lambda: run_python("stowage", d),
                "inspect --no-hash": lambda: run_inspect(args.stowage, d),
                "verify": lambda: run_inspect(args.stowage, d, ("verify",), ok=(0, 1)),
                "rank 0's shard, FileSystemReader": lambda: run_python("torch", d, "--shard-child"),
                "rank 0's shard, StorageReader": lambda: run_python("stowage", d, "--shard-child")}
        results = {name: [] for name in rows}
        errors = {}
        for _ in range(args.rounds):
            for name, run in rows.items():
                seconds, peak, err = run()
                if err:
                    errors[name] = err
                else:
                    results[name].append((seconds, peak))
        print(f"{chunks} chunks ({chunks // args.ranks} tensors x {args.ranks} ranks), "
              f".metadata {size / 2**20:.1f} MiB; {args.rounds} rounds, medians:")
        def median_of(name):
            return statistics.median(t for t, _ in results[name] or [(float("nan"), 0)])

        # The shard's reads against PyTorch's read of it; the rest against
        # PyTorch's `read_metadata`.
        for name, runs in results.items():
            if name in errors:
                print(f"  {name:34s} refused: {errors[name]}")
                continue
            base = median_of("rank 0's shard, FileSystemReader" if "shard" in name
                             else "FileSystemReader.read_metadata")
            m = statistics.median(t for t, _ in runs)
            peak = statistics.median(p for _, p in runs)
            print(f"  {name:34s} {m * 1000:9.0f} ms  {m / base:5.2f}x PyTorch  peak {peak:7.0f} MiB")


if __name__ == "__main__":
    main()
