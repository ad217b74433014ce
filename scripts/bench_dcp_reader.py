#!/usr/bin/env python3
"""stowage.dcp.StorageReader against PyTorch's FileSystemReader, and
rank-partitioned conversion against one process, side by side in one run.

usage: $TORCH_PY scripts/bench_dcp_reader.py WORKDIR --stowage BIN [--gib 1] [--rounds 3]

Makes WORKDIR/dcp once: GIB GiB of float32 tensors of 64 MiB, saved by
PyTorch's FileSystemWriter from 4 processes (gloo on the CPU, DTensor
Shard(0)). Then, each round, in this order:
- `dcp.load` of it at world size 2 (torchrun, gloo, Shard(0) over 2 ranks)
  through FileSystemReader, then through stowage.dcp.StorageReader: the
  time of the `dcp.load` call alone (after a barrier, to the last rank's
  return), and each rank's peak resident memory;
- `BIN convert WORKDIR/dcp OUT --to safetensors --max-shard-size 256MB` in
  one process, then as 2 and as 4 processes at once (`--rank`/`--world`),
  rank r pinned to core r % cores (taskset), after a `sync`: the wall
  time to the last one's exit, and each process's peak resident memory
  (/usr/bin/time). --convert-only runs these rows alone.
The page cache is warm (the files are read first). Prints each median.

With --url, the same `dcp.load` at world size 2 by URL instead: the DCP is
uploaded to a local S3 server (s3rver, from npm, installed under
target/s3rver on first use, as scripts/remote-bench.sh does), reached
through `wan_proxy` (an example of the stowage crate: each connection gets
S3's per-connection rate and a delay per request, by default 90 MB/s and
30 ms), and read through PyTorch's FsspecReader (s3fs) against
stowage.dcp.StorageReader, each round counting the requests the server
answered during the load (its log). s3fs pins a botocore that may not be the one installed;
--fsspec-path puts a folder of its own (`pip install --target DIR s3fs`)
first on the FsspecReader ranks' path.

(with the package installed from a release wheel: maturin build --release;
the URL rows need `cargo build --release -p stowage --features remote
--example wan_proxy`, npm, boto3 and s3fs)
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROWS, COLS = 4096, 4096  # 64 MiB of float32


def save_rank(rank, world, d, n):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29541")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    g = torch.Generator().manual_seed(rank)
    rows = ROWS // world
    sd = {f"layers.{i}.weight": DTensor.from_local(torch.randn(rows, COLS, generator=g), mesh, [Shard(0)])
          for i in range(n)}
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(d))
    dist.barrier()
    dist.destroy_process_group()


def load_rank(kind, d, n):
    """One rank of the timed load (under torchrun)."""
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh

    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    sd = {f"layers.{i}.weight": distribute_tensor(torch.empty(ROWS, COLS), mesh, [Shard(0)]) for i in range(n)}
    if kind == "stowage":
        from stowage.dcp import StorageReader

        reader = StorageReader(d)
    elif kind == "fsspec":
        from torch.distributed.checkpoint import FsspecReader

        reader = FsspecReader(d, client_kwargs={"endpoint_url": os.environ["AWS_ENDPOINT_URL"]},
                              key=os.environ["AWS_ACCESS_KEY_ID"], secret=os.environ["AWS_SECRET_ACCESS_KEY"])
    else:
        reader = dcp.FileSystemReader(d)
    dist.barrier()
    t0 = time.perf_counter()
    dcp.load(sd, storage_reader=reader)
    dist.barrier()
    elapsed = time.perf_counter() - t0
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    # A file per rank: torchrun interleaves the ranks' output.
    with open(os.path.join(os.environ["BENCH_OUT"], f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump({"seconds": elapsed, "peak_mib": peak}, f)
    dist.destroy_process_group()


def run_load(kind, d, n, env=None):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           __file__, "--load-rank", kind, d, str(n)]
    import tempfile

    with tempfile.TemporaryDirectory() as results:
        env = dict(env or os.environ, OMP_NUM_THREADS="1", BENCH_OUT=results)
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            sys.exit(f"{kind}: {out.stderr[-2000:]}")
        ranks = []
        for name in sorted(os.listdir(results)):
            with open(os.path.join(results, name)) as f:
                ranks.append(json.load(f))
    return max(x["seconds"] for x in ranks), max(x["peak_mib"] for x in ranks)


def run_convert(binary, d, out, world):
    shutil.rmtree(out, ignore_errors=True)
    # Nothing of an earlier run left dirty: its writeback would land in
    # this run's time.
    os.sync()
    cores = os.cpu_count() or 1
    t0 = time.perf_counter()
    procs = []
    for rank in range(world):
        # Each process pinned to one core, as the issue asks.
        cmd = ["taskset", "-c", str(rank % cores), "/usr/bin/time", "-f", "%M", binary, "-q", "convert", d,
               out, "--to", "safetensors", "--max-shard-size", "256MB", "--no-sync"]
        if world > 1:
            cmd += ["--rank", str(rank), "--world", str(world)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    peaks = []
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"convert: {err}")
        peaks.append(int(err.strip().splitlines()[-1]) / 1024)
    return time.perf_counter() - t0, max(peaks)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--load-rank":
        load_rank(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--stowage", required=True)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--convert-only", action="store_true", help="only the convert rows (no torchrun loads)")
    ap.add_argument("--url", action="store_true", help="load by URL through wan_proxy, against FsspecReader")
    ap.add_argument("--rate-mb", type=int, default=90)
    ap.add_argument("--latency-ms", type=int, default=30)
    ap.add_argument("--fsspec-path", help="a folder holding s3fs, first on the FsspecReader ranks' path")
    args = ap.parse_args()
    n = int(args.gib * 1024 / 64)
    d = os.path.join(args.work, "dcp")
    if not os.path.exists(os.path.join(d, ".metadata")):
        import torch.multiprocessing as mp

        os.makedirs(d, exist_ok=True)
        mp.spawn(save_rank, args=(4, d, n), nprocs=4, join=True)
    for name in os.listdir(d):
        with open(os.path.join(d, name), "rb") as f:
            while f.read(1 << 24):
                pass
    if args.url:
        by_url(args, d, n)
        return
    loads = ("FileSystemReader", "stowage StorageReader") if not args.convert_only else ()
    converts = {w: f"convert, {w} process{'es' if w > 1 else ''}" for w in (1, 2, 4)}
    results = {k: [] for k in (*loads, *converts.values())}
    for _ in range(args.rounds):
        if loads:
            results["FileSystemReader"].append(run_load("torch", d, n))
            results["stowage StorageReader"].append(run_load("stowage", d, n))
        out = os.path.join(args.work, "st")
        for world, name in converts.items():
            results[name].append(run_convert(args.stowage, d, out, world))
    print(f"{n} tensors of 64 MiB ({args.gib} GiB), a 4-rank DCP; {args.rounds} rounds, medians:")
    base = {"FileSystemReader": "FileSystemReader", "stowage StorageReader": "FileSystemReader",
            **{name: converts[1] for name in converts.values()}}
    for name, runs in results.items():
        m = statistics.median(t for t, _ in runs)
        b = statistics.median(t for t, _ in results[base[name]])
        peak = statistics.median(p for _, p in runs)
        print(f"  {name:24s} {m * 1000:8.0f} ms  {b / m:5.2f}x {base[name]:20s} peak {peak:7.0f} MiB per process")



def by_url(args, d, n):
    """The --url rounds: s3rver behind wan_proxy, FsspecReader against
    StorageReader, with the GETs each load sent."""
    import socket
    import tempfile

    import boto3

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    s3rver = os.path.join(root, "target/s3rver/node_modules/.bin/s3rver")
    if not os.path.exists(s3rver):
        subprocess.run(["npm", "install", "--silent", "--prefix", os.path.join(root, "target/s3rver"),
                        "s3rver@3.7.1"], check=True)
    proxy_bin = os.path.join(root, "target/release/examples/wan_proxy")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = []
    with tempfile.TemporaryDirectory() as data:
        log = open(os.path.join(data, "s3rver.log"), "w+")
        try:
            procs.append(subprocess.Popen([s3rver, "-d", os.path.join(data, "store"), "-a", "127.0.0.1",
                                           "-p", str(port)], stdout=log, stderr=subprocess.STDOUT))
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.2)
            keys = dict(aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER", region_name="us-east-1")
            client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", **keys)
            client.create_bucket(Bucket="bench")
            for name in os.listdir(d):
                client.upload_file(os.path.join(d, name), "bench", "dcp/" + name)
            proxy = subprocess.Popen([proxy_bin, str(port), str(args.rate_mb), str(args.latency_ms)],
                                     stdout=subprocess.PIPE, text=True)
            procs.append(proxy)
            proxy_port = int(proxy.stdout.readline())
            env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy_port}", AWS_ALLOW_HTTP="true",
                       AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER", AWS_REGION="us-east-1")
            fsspec_env = dict(env)
            if args.fsspec_path:
                fsspec_env["PYTHONPATH"] = os.pathsep.join(
                    p for p in (args.fsspec_path, env.get("PYTHONPATH")) if p)

            answered = re.compile(r" [1-5]\d\d \d+ms ")

            def gets():
                # s3rver logs one line per request answered ("… 206 5ms 2b");
                # during a load, every request is a read.
                log.flush()
                log.seek(0)
                return sum(1 for line in log if answered.search(line))

            results = {"FsspecReader": [], "stowage StorageReader": []}
            for _ in range(args.rounds):
                for name, kind, e in (("FsspecReader", "fsspec", fsspec_env),
                                      ("stowage StorageReader", "stowage", env)):
                    before = gets()
                    seconds, peak = run_load(kind, "s3://bench/dcp", n, e)
                    results[name].append((seconds, peak, gets() - before))
        finally:
            for p in procs:
                p.kill()
            log.close()
    print(f"{n} tensors of 64 MiB ({args.gib} GiB), a 4-rank DCP, by URL through wan_proxy "
          f"({args.rate_mb} MB/s and {args.latency_ms} ms per connection); {args.rounds} rounds, medians:")
    b = statistics.median(t for t, _, _ in results["FsspecReader"])
    for name, runs in results.items():
        m = statistics.median(t for t, _, _ in runs)
        peak = statistics.median(p for _, p, _ in runs)
        requests = statistics.median(r for _, _, r in runs)
        print(f"  {name:24s} {m * 1000:8.0f} ms  {b / m:5.2f}x FsspecReader  {requests:5.0f} requests  "
              f"peak {peak:7.0f} MiB per process")


if __name__ == "__main__":
    main()
