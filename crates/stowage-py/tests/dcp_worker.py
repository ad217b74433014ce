"""One rank of a torch.distributed job (run under torchrun, gloo on the CPU)
that loads or saves a distributed checkpoint, for tests/test_dcp.py.

usage: torchrun --nproc-per-node N dcp_worker.py load READER SRC REFERENCE DIM
       torchrun --nproc-per-node N dcp_worker.py save WRITER DST REFERENCE DIM

REFERENCE is a torch.save file of the full state dict. Each tensor of at
least one dimension is a DTensor sharded on dimension DIM (dimension 0 where
it has fewer), the others replicated. `load` fills zeroed shards through
READER (`stowage` or `torch`: stowage.dcp.StorageReader or PyTorch's
FileSystemReader) and checks every rank's shards against the reference's;
`save` writes the reference's shards through WRITER. Exits non-zero, with
the difference, on any mismatch.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh


def placements(t, dim):
    if t.dim() == 0:
        return [Replicate()]
    return [Shard(dim if dim < t.dim() else 0)]


def sharded(reference, mesh, dim, fill):
    out = {}
    for k, v in reference.items():
        if isinstance(v, dict):
            out[k] = sharded(v, mesh, dim, fill)
        elif isinstance(v, torch.Tensor):
            out[k] = distribute_tensor(v if fill else torch.zeros_like(v), mesh, placements(v, dim))
        else:
            out[k] = None if not fill else v
    return out


def check(got, want, path=""):
    for k, v in want.items():
        where = f"{path}.{k}" if path else k
        if isinstance(v, dict):
            check(got[k], v, where)
        elif hasattr(v, "to_local"):
            a, b = got[k].to_local(), v.to_local()
            if not torch.equal(a, b):
                sys.exit(f"rank {dist.get_rank()}: {where}: shard differs: {a} vs {b}")
        elif got[k] != v:
            sys.exit(f"rank {dist.get_rank()}: {where}: {got[k]!r} vs {v!r}")


def main():
    action, kind, path, reference, dim = sys.argv[1:6]
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    full = torch.load(reference, weights_only=True)
    want = sharded(full, mesh, int(dim), fill=True)
    if action == "load":
        if kind == "stowage":
            from stowage.dcp import StorageReader

            reader = StorageReader(path)
        else:
            reader = dcp.FileSystemReader(path)
        state = sharded(full, mesh, int(dim), fill=False)
        dcp.load(state, storage_reader=reader)
        check(state, want)
    else:
        if kind == "stowage":
            from stowage.dcp import StorageWriter

            writer = StorageWriter(path)
        elif kind == "stowage-zstd":
            from stowage.dcp import StorageWriter

            writer = StorageWriter(path, zstd=True, thread_count=2)
        else:
            writer = dcp.FileSystemWriter(path)
        dcp.save(want, storage_writer=writer)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
