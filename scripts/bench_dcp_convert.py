"""Benchmark: a distributed checkpoint (DCP) of 4 ranks -> a sharded safetensors
set, stowage against PyTorch's route, side by side, in one run.

usage: python scripts/bench_dcp_convert.py STOWAGE_BINARY WORKDIR [GIB]

Makes WORKDIR/dcp once (GIB GiB, default 2, of float32 tensors of 64 MiB,
each split by rows over 4 ranks: 4 processes, gloo on CPU, DTensor Shard(0)),
then times, each under /usr/bin/time for the peak resident memory:
- stowage:  `stowage convert WORKDIR/dcp WORKDIR/st --to safetensors --max-shard-size 1GB`
- PyTorch:  `dcp_to_torch_save(dcp, pt)`, `torch.load(pt)`, then
            `huggingface_hub.save_torch_state_dict(sd, dir, max_shard_size="1GB")`
and checks that both sets hold the same tensors. Prints one JSON line per run.
"""
import json
import os
import shutil
import subprocess
import sys
import time

TENSOR_ROWS, COLS = 4096, 4096  # 64 MiB of float32


def rank_main(rank, world, d, n_tensors):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    g = torch.Generator().manual_seed(rank)
    rows = TENSOR_ROWS // world
    sd = {f"layers.{i}.weight": DTensor.from_local(torch.randn(rows, COLS, generator=g), mesh, [Shard(0)])
          for i in range(n_tensors)}
    dcp.save(sd, checkpoint_id=d)
    dist.barrier()
    dist.destroy_process_group()


def timed(cmd):
    t = time.perf_counter()
    out = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    if out.returncode != 0:
        sys.exit(f"{cmd}: {out.stderr}")
    rss = next(int(l.split()[-1]) for l in out.stderr.splitlines() if "Maximum resident" in l)
    return elapsed, rss / 1024


PYTORCH_ROUTE = r'''
import sys, torch, tempfile, os
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
from huggingface_hub import save_torch_state_dict
d, out = sys.argv[1], sys.argv[2]
pt = out + ".pt"
dcp_to_torch_save(d, pt)
sd = torch.load(pt, weights_only=True)
save_torch_state_dict(sd, out, max_shard_size="1GB")
os.remove(pt)
'''

if __name__ == "__main__":
    stowage, work = sys.argv[1], sys.argv[2]
    gib = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
    n = int(gib * 1024 / 64)
    d = os.path.join(work, "dcp")
    if not os.path.exists(os.path.join(d, ".metadata")):
        import torch.multiprocessing as mp
        os.makedirs(d, exist_ok=True)
        mp.spawn(rank_main, args=(4, d, n), nprocs=4, join=True)
    st, pyst = os.path.join(work, "st"), os.path.join(work, "py")
    for p in (st, pyst):
        shutil.rmtree(p, ignore_errors=True)
    os.makedirs(pyst)
    s_time, s_rss = timed([stowage, "-q", "convert", d, st, "--to", "safetensors", "--max-shard-size", "1GB"])
    p_time, p_rss = timed([sys.executable, "-c", PYTORCH_ROUTE, d, pyst])
    same = subprocess.run([stowage, "-q", "diff", st, pyst]).returncode == 0
    print(json.dumps({"gib": gib, "tensors": n, "largest_tensor_mib": 64,
                      "stowage_s": round(s_time, 2), "stowage_peak_mib": round(s_rss),
                      "pytorch_s": round(p_time, 2), "pytorch_peak_mib": round(p_rss),
                      "speedup": round(p_time / s_time, 2), "same": same}))
