"""Make the PyTorch Distributed Checkpoint (DCP) fixtures with real PyTorch.

usage: python scripts/make_dcp_fixtures.py [--hostile]   (needs torch, safetensors, zstandard)
(--hostile: only remake hostile/ from the others)

Writes crates/stowage/tests/fixtures/dcp/NAME/ (a DCP directory: `.metadata`
and `__R_0.distcp` files) and NAME.expected.json beside it: PyTorch's own
reading of the checkpoint (`dcp_to_torch_save`, then `torch.load`), each
tensor's name, dtype, shape and values, and the non-tensor values.

- one:          one process, the default torch.save-per-item format;
- zstd:         the same, each item compressed (`stream.zstd/1`);
- safetensors:  one process, SerializationFormat.SAFETENSORS;
- four:         four processes (gloo on CPU), DTensors sharded across the ranks
                (rows, and columns of another), one replicated, and values;
- hf:           four processes through HuggingFaceStorageWriter(save_distributed=True):
                one safetensors file per rank with DCP_SHARDING_INFO, no .metadata.
"""
import json
import os
import shutil
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "stowage", "tests", "fixtures", "dcp")


def state_dict():
    g = torch.Generator().manual_seed(0)
    return {
        "model": {
            "w": torch.randn(6, 4, generator=g),
            "b": torch.arange(4, dtype=torch.float16),
            "emb": torch.randn(5, 3, generator=g).to(torch.bfloat16),
            "steps": torch.tensor([1, 2, 3], dtype=torch.int64),
        },
        "epoch": 3,
        "config": {"lr": 0.001, "name": "tiny", "betas": (0.9, 0.999)},
    }


def flatten(obj, path, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, path + [k], out)
    elif isinstance(obj, torch.Tensor):
        out["tensors"].append({
            "path": path,
            "dtype": str(obj.dtype).removeprefix("torch."),
            "shape": list(obj.shape),
            "values": obj.float().flatten().tolist(),
        })
    else:
        out["values"].append({"path": path, "repr": repr(obj)})


def expected(name, loaded=None):
    """PyTorch's reading of the checkpoint, or `loaded` where PyTorch's
    FileSystemReader cannot read the format (SAFETENSORS: it torch.loads each item)."""
    d = os.path.join(ROOT, name)
    if loaded is None:
        with tempfile.TemporaryDirectory() as t:
            pt = os.path.join(t, "x.pt")
            dcp_to_torch_save(d, pt)
            loaded = torch.load(pt, weights_only=False)
    out = {"tensors": [], "values": []}
    flatten(loaded, [], out)
    with open(d + ".expected.json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


def fresh(name):
    d = os.path.join(ROOT, name)
    shutil.rmtree(d, ignore_errors=True)
    return d


def single(name, readable=True, **writer):
    d = fresh(name)
    dcp.save(state_dict(), storage_writer=FileSystemWriter(d, **writer), no_dist=True)
    expected(name, None if readable else state_dict())


def rank_main(rank, world, port, d):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    sd = state_dict()
    m = sd["model"]
    big = torch.arange(8 * 6, dtype=torch.float32).view(8, 6)
    m["w"] = distribute_tensor(m["w"].repeat(2, 1), mesh, [Shard(0)])      # 12 x 4: 3 rows per rank
    m["cols"] = distribute_tensor(big, mesh, [Shard(1)])                   # 8 x 6: uneven columns (2,2,1,1)
    m["emb"] = distribute_tensor(m["emb"], mesh, [Replicate()])
    dcp.save(sd, checkpoint_id=d)
    dist.barrier()
    dist.destroy_process_group()


def hf_rank_main(rank, world, port, d):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.checkpoint import HuggingFaceStorageWriter
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    sd = hf_state_dict()
    sd["w"] = distribute_tensor(sd["w"], mesh, [Shard(0)])
    sd["cols"] = distribute_tensor(sd["cols"], mesh, [Shard(1)])
    sd["emb"] = distribute_tensor(sd["emb"], mesh, [Replicate()])
    dcp.save(sd, storage_writer=HuggingFaceStorageWriter(d, save_distributed=True, enable_consolidation=False))
    dist.barrier()
    dist.destroy_process_group()


def hf_state_dict():
    g = torch.Generator().manual_seed(1)
    return {
        "w": torch.randn(12, 4, generator=g),
        "cols": torch.arange(8 * 6, dtype=torch.float32).view(8, 6),
        "emb": torch.randn(5, 3, generator=g).to(torch.bfloat16),
        "b": torch.arange(4, dtype=torch.float16),
    }


def hf():
    """Four ranks through HuggingFaceStorageWriter(save_distributed=True):
    `shard-0000R-model-00001-of-00001.safetensors` files with DCP_SHARDING_INFO.
    Expected: the tensors as built (PyTorch reads this layout only consolidated)."""
    import torch.multiprocessing as mp
    d = fresh("hf")
    os.makedirs(d)
    mp.spawn(hf_rank_main, args=(4, 29519, d), nprocs=4, join=True)
    expected("hf", hf_state_dict())


def four():
    import torch.multiprocessing as mp
    d = fresh("four")
    os.makedirs(d)
    mp.spawn(rank_main, args=(4, 29517, d), nprocs=4, join=True)
    expected("four")


if __name__ == "__main__" and len(sys.argv) == 1:
    os.makedirs(ROOT, exist_ok=True)
    single("one")
    from torch.distributed.checkpoint._extension import ZStandard
    single("zstd", _extensions=[ZStandard()])
    from torch.distributed.checkpoint.filesystem import SerializationFormat
    single("safetensors", readable=False, serialization_format=SerializationFormat.SAFETENSORS)
    four()
    hf()
    hostile()


def hostile():
    """Hostile variants of `four` and `zstd` (their .metadata rewritten with
    pickle, the data files copied): a chunk past the end of its file, two
    chunks holding the same elements, a missing chunk, a zstd bomb, and a
    metadata naming os.system."""
    import pickle
    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, MetadataIndex
    base = os.path.join(ROOT, "hostile")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)

    def variant(name, src, edit):
        d = os.path.join(base, name)
        shutil.copytree(os.path.join(ROOT, src), d)
        with open(os.path.join(d, ".metadata"), "rb") as f:
            m = pickle.load(f)
        edit(m, d)
        with open(os.path.join(d, ".metadata"), "wb") as f:
            pickle.dump(m, f)

    def past_end(m, d):
        info = m.storage_data[MetadataIndex("model.w", torch.Size([3, 0]))]
        info.offset = 1 << 40

    def overlap(m, d):
        chunks = m.state_dict_metadata["model.w"].chunks
        chunks[1].offsets = torch.Size([2, 0])
        m.storage_data[MetadataIndex("model.w", torch.Size([2, 0]))] = m.storage_data[MetadataIndex("model.w", torch.Size([3, 0]))]

    def missing(m, d):
        del m.state_dict_metadata["model.w"].chunks[2]

    def bomb(m, d):
        import zstandard
        info = m.storage_data[MetadataIndex("model.b", torch.Size([0]))]
        path = os.path.join(d, info.relative_path)
        c = zstandard.ZstdCompressor().compressobj()
        blob = b"".join(c.compress(b"\0" * (1 << 24)) for _ in range(64)) + c.flush()  # 1 GiB of zeros
        with open(path, "ab") as f:
            info.offset = f.tell()
            f.write(blob)
        info.length = len(blob)

    variant("past_end", "four", past_end)
    variant("overlap", "four", overlap)
    variant("missing", "four", missing)
    variant("bomb", "zstd", bomb)
    d = os.path.join(base, "os_system")
    os.makedirs(d)
    with open(os.path.join(d, ".metadata"), "wb") as f:
        f.write(b"\x80\x04cos\nsystem\n\x8c\x04echo\x85R.")


if __name__ == "__main__" and "--hostile" in sys.argv:
    hostile()

if __name__ == "__main__" and "--hf" in sys.argv:
    hf()
