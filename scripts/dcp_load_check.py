"""Check that PyTorch's `torch.distributed.checkpoint.load` reads a DCP folder
as expected.

usage: python scripts/dcp_load_check.py DIR EXPECTED_JSON [NPROCS]

EXPECTED_JSON is the form `make_dcp_fixtures.py` writes (tensors by path with
dtype, shape and values; values by path with their repr). With NPROCS = 1 the
load runs in this process (no_dist); with more, NPROCS processes (gloo on
CPU) load every 2-D tensor into a DTensor sharded along its last dimension,
a different sharding from stowage's (first dimension), and rank 0 compares
the full tensors. Exit status 0 when everything matches.

The processes meet through a file store (no TCP port to race for). A world
whose rank dies by SIGABRT runs once more: gloo's transport can abort a
rank on a loaded machine (an uncaught exception in its listener thread),
which no file can cause; a rank that raises (a mismatch) fails at once.
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp


def template(expected, mesh=None):
    sd = {}
    for t in expected["tensors"]:
        d = sd
        for k in t["path"][:-1]:
            d = d.setdefault(k, {})
        z = torch.zeros(t["shape"], dtype=getattr(torch, t["dtype"]))
        if mesh is not None and z.dim() == 2:
            from torch.distributed.tensor import Shard, distribute_tensor
            z = distribute_tensor(z, mesh, [Shard(1)])
        d[t["path"][-1]] = z
    for v in expected["values"]:
        d = sd
        for k in v["path"][:-1]:
            d = d.setdefault(k, {})
        d[v["path"][-1]] = None
    return sd


def compare(sd, expected):
    for t in expected["tensors"]:
        x = sd
        for k in t["path"]:
            x = x[k]
        if hasattr(x, "full_tensor"):
            x = x.full_tensor()
        assert str(x.dtype) == "torch." + t["dtype"], t["path"]
        assert list(x.shape) == t["shape"], t["path"]
        assert x.float().flatten().tolist() == t["values"], t["path"]
    for v in expected["values"]:
        x = sd
        for k in v["path"]:
            x = x[k]
        assert repr(x) == v["repr"], (v["path"], repr(x), v["repr"])


def rank_main(rank, world, store, d, expected):
    dist.init_process_group("gloo", init_method=store, rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (world,))
    sd = template(expected, mesh)
    dcp.load(sd, checkpoint_id=d)
    compare(sd, expected)  # full_tensor() is collective: every rank compares
    dist.barrier()
    dist.destroy_process_group()


def run_world(n, d, expected):
    import tempfile
    import torch.multiprocessing as mp
    for attempt in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            store = "file://" + os.path.join(tmp, "store")
            try:
                mp.spawn(rank_main, args=(n, store, d, expected), nprocs=n, join=True)
                return
            except mp.ProcessExitedException as e:
                if e.signal_name != "SIGABRT" or attempt == 2:
                    raise
                print(f"dcp_load_check: rank {e.error_index} of {n} died by {e.signal_name}; "
                      "running the world once more", file=sys.stderr)


if __name__ == "__main__":
    d, expected = sys.argv[1], json.load(open(sys.argv[2]))
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    if n == 1:
        sd = template(expected)
        dcp.load(sd, checkpoint_id=d, no_dist=True)
        compare(sd, expected)
    else:
        run_world(n, d, expected)
    print("ok")
