"""stowage.dcp.StorageReader under real torch.distributed (torchrun, gloo,
CPU): every rank's shards, loaded through stowage from a distributed
checkpoint, a .bin, a .safetensors file or a sharded set, on disk or by
URL, equal the source's, at world sizes and shardings other than the
writer's."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import torch

import _torchrun

import stowage

WORKER = pathlib.Path(__file__).with_name("dcp_worker.py")


def torchrun(world, *args):
    _torchrun.torchrun(world, WORKER, *args)


def state_dict():
    g = torch.Generator().manual_seed(0)
    return {
        "embed.weight": torch.randn(12, 6, generator=g),
        "layers.0.weight": torch.randn(6, 6, generator=g),
        "layers.0.bias": torch.randn(6, generator=g),
        "head.weight": torch.randn(9, 6, generator=g).to(torch.bfloat16),
        "steps": torch.tensor(7, dtype=torch.int64),
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    path = tmp_path_factory.mktemp("ref") / "reference.pt"
    torch.save(state_dict(), path)
    return path


@pytest.fixture(scope="module")
def torch_dcp(tmp_path_factory, reference):
    """A distributed checkpoint PyTorch's FileSystemWriter wrote at world
    size 4, row-wise."""
    out = tmp_path_factory.mktemp("dcp") / "ckpt"
    torchrun(4, "save", "torch", out, reference, 0)
    return out


@pytest.mark.parametrize("world,dim", [(1, 0), (2, 1), (3, 0)])
def test_a_torch_written_dcp_loads_at_other_world_sizes(torch_dcp, reference, world, dim):
    torchrun(world, "load", "stowage", torch_dcp, reference, dim)


def test_the_reference_reader_agrees(torch_dcp, reference):
    # What the test checks against is what FileSystemReader gives.
    torchrun(3, "load", "torch", torch_dcp, reference, 1)


@pytest.mark.parametrize("form", ["bin", "safetensors", "sharded"])
def test_single_files_and_sharded_sets_load_into_a_sharded_model(tmp_path, reference, form):
    sd = state_dict()
    if form == "bin":
        src = tmp_path / "pytorch_model.bin"
        torch.save(sd, src)
    elif form == "safetensors":
        src = tmp_path / "model.safetensors"
        stowage.save(sd, src)
    else:
        src = tmp_path / "sharded"
        stowage.save(sd, src, to="safetensors", max_shard_size="300B")
        assert len(list(src.glob("*.safetensors"))) > 1
    torchrun(2, "load", "stowage", src, reference, 0)


def test_values_are_read_by_stowage_and_given_to_the_planner(tmp_path):
    sd = {"model": {"w": torch.arange(8.0).view(4, 2)}, "epoch": 3, "name": "run-1"}
    src = tmp_path / "ckpt.pt"
    torch.save(sd, src)
    ref = tmp_path / "ref.pt"
    torch.save(sd, ref)
    torchrun(2, "load", "stowage", src, ref, 0)


def test_an_unsafe_value_is_refused_before_the_planner_sees_it(tmp_path):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata

    from stowage.dcp import StorageReader

    src = tmp_path / "whole.pt"
    torch.save({"w": torch.ones(2), "module": torch.nn.Linear(1, 1)}, src)
    with pytest.raises(stowage.UnsafeGlobalError):
        StorageReader(src).read_metadata()
    # Inert, the class is never imported; its value reaches the planner only
    # as stowage's InertObject.
    md = StorageReader(src, inert=True).read_metadata()
    assert isinstance(md.state_dict_metadata["module"], BytesStorageMetadata)
    state = {"w": torch.zeros(2)}
    dcp.load(state, storage_reader=StorageReader(src, inert=True), no_dist=True)
    assert torch.equal(state["w"], torch.ones(2))


def test_the_read_is_only_the_plans_bytes(tmp_path):
    from torch.distributed.checkpoint.planner import LoadItemType, ReadItem
    from torch.distributed.checkpoint.metadata import MetadataIndex

    from stowage.dcp import StorageReader

    src = tmp_path / "big.pt"
    torch.save({"w": torch.arange(1 << 20, dtype=torch.float32).view(1024, 1024)}, src)
    reader = StorageReader(src)
    reader.read_metadata()
    req = ReadItem(
        type=LoadItemType.TENSOR,
        dest_index=MetadataIndex("w"),
        dest_offsets=torch.Size([0, 0]),
        storage_index=MetadataIndex("w", torch.Size([0, 0])),
        storage_offsets=torch.Size([512, 0]),
        lengths=torch.Size([2, 1024]),
    )

    def rchar():
        with open("/proc/self/io") as f:
            return int(next(line for line in f if line.startswith("rchar:")).split()[1])

    before = rchar()
    part = reader._read(req)
    assert rchar() - before < 64 << 10
    want = torch.arange(1 << 20, dtype=torch.float32).view(1024, 1024)[512:514]
    assert torch.equal(part, want)
    # Into the planner's tensor, with no buffer between: nothing to copy.
    target = torch.zeros(2, 1024)
    before = rchar()
    assert reader._fill(req, target) is None
    assert rchar() - before < 64 << 10
    assert torch.equal(target, want)
    # A target the part cannot go straight into gets the part to copy.
    assert torch.equal(reader._fill(req, torch.zeros(1024, 2).t()), want)


def _files_of_one_save(out):
    """The folder's files, each data file's name without the save's id
    (`__{rank}_{save}_{i}.distcp` as `__{rank}_{i}.distcp`, FileSystemWriter's
    names); every data file is of one save."""
    import re

    names = sorted(p.name for p in out.iterdir())
    saves = {m.group(1) for n in names if (m := re.match(r"__\d+_([0-9a-f]{12})_\d+\.distcp$", n))}
    assert len(saves) == 1, names
    save = saves.pop()
    return [n.replace(f"_{save}_", "_") if n.endswith(".distcp") else n for n in names]


def test_a_stowage_written_dcp_is_read_by_pytorch_at_another_world_size(tmp_path, reference):
    out = tmp_path / "ckpt"
    torchrun(2, "save", "stowage", out, reference, 0)
    assert _files_of_one_save(out) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    torchrun(3, "load", "torch", out, reference, 1)
    torchrun(1, "load", "stowage", out, reference, 0)


def test_the_writers_zstd_and_threads_are_read_by_pytorch(tmp_path, reference):
    pytest.importorskip("zstandard", reason="PyTorch reads zstd items with zstandard (.ci/run installs it)")
    out = tmp_path / "ckpt"
    torchrun(2, "save", "stowage-zstd", out, reference, 0)
    # Two files per rank, as FileSystemWriter(thread_count=2) writes them.
    assert _files_of_one_save(out) == [
        ".metadata", "__0_0.distcp", "__0_1.distcp", "__1_0.distcp", "__1_1.distcp"]
    torchrun(3, "load", "torch", out, reference, 1)
    torchrun(1, "load", "stowage", out, reference, 0)
    # Each item is a zstd frame, recorded as such.
    from torch.distributed.checkpoint import FileSystemReader

    infos = FileSystemReader(out).read_metadata().storage_data.values()
    assert infos and all(i.transform_descriptors == ["stream.zstd/1"] for i in infos)
    for i in infos:
        with open(out / i.relative_path, "rb") as f:
            f.seek(i.offset)
            assert f.read(4) == b"\x28\xb5\x2f\xfd", i


@pytest.mark.parametrize("name", ["hf", "zstd", "safetensors", "four"])
def test_every_dcp_layout_is_a_source(fixtures, name):
    """PyTorch's DCP fixtures (the per-rank Hugging Face layout, zstd items,
    the safetensors mode, four ranks) load through the reader as stowage
    loads them, and as PyTorch's expected answer says."""
    import json

    import torch.distributed.checkpoint as dcp

    from stowage.dcp import StorageReader

    folder = fixtures / "dcp" / name
    whole = stowage.load(folder)
    flat = dict(_flat_tensors(whole))
    assert flat
    state = {k: torch.zeros(v.shape, dtype=v.dtype) for k, v in flat.items()}
    dcp.load(state, storage_reader=StorageReader(folder), no_dist=True)
    expected = json.loads((folder.parent / f"{name}.expected.json").read_text())
    for t in expected["tensors"]:
        key = ".".join(map(str, t["path"]))
        assert torch.equal(state[key], flat[key]), key
        assert list(state[key].shape) == t["shape"], key
        if "values" in t:
            got = state[key].double() if state[key].dtype.is_floating_point else state[key].long()
            assert torch.equal(got, torch.tensor(t["values"], dtype=got.dtype).view(t["shape"])), key


def _flat_tensors(value, prefix=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flat_tensors(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, torch.Tensor):
        yield prefix, value


def test_a_failed_save_leaves_no_metadata(tmp_path):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    from stowage.dcp import StorageWriter

    out = tmp_path / "ckpt"
    # The rank's second item cannot be written (a meta tensor has no bytes).
    state = {"a": torch.ones(1 << 16), "b": torch.empty(4, device="meta")}
    with pytest.raises(CheckpointException, match="a tensor on meta"):
        dcp.save(state, storage_writer=StorageWriter(out), no_dist=True)
    assert not (out / ".metadata").exists()
    assert not any(p.name.endswith(".distcp") for p in out.iterdir()), list(out.iterdir())


def test_values_and_nested_dicts_round_trip_through_the_writer(tmp_path):
    import torch.distributed.checkpoint as dcp

    from stowage.dcp import StorageReader, StorageWriter

    state = {"model": {"w": torch.arange(6.0).view(2, 3), "b": torch.ones(3, dtype=torch.bfloat16)}, "epoch": 4}
    dcp.save(state, storage_writer=StorageWriter(tmp_path / "c"), no_dist=True)
    back = {"model": {"w": torch.zeros(2, 3), "b": torch.zeros(3, dtype=torch.bfloat16)}, "epoch": 0}
    dcp.load(back, storage_reader=dcp.FileSystemReader(tmp_path / "c"), no_dist=True)
    assert torch.equal(back["model"]["w"], state["model"]["w"]) and back["epoch"] == 4
    back["epoch"] = 0
    dcp.load(back, storage_reader=StorageReader(tmp_path / "c"), no_dist=True)
    assert torch.equal(back["model"]["b"], state["model"]["b"]) and back["epoch"] == 4
    loaded = stowage.load(tmp_path / "c")
    assert torch.equal(loaded["model"]["w"], state["model"]["w"])


def test_rank_partitioned_conversion_writes_what_one_process_writes(tmp_path, torch_dcp):
    single = tmp_path / "single"
    stowage.convert(torch_dcp, single, to="safetensors", max_shard_size="200B")
    expected = {p.name: p.read_bytes() for p in single.iterdir()}
    assert len(expected) > 2
    parts = tmp_path / "parts"
    said = [stowage.convert(torch_dcp, parts, to="safetensors", max_shard_size="200B", rank=r, world=3)
            for r in range(3)]
    assert "wrote the index" in said[-1] and "wrote the index" not in said[0]
    assert {p.name: p.read_bytes() for p in parts.iterdir()} == expected
    loaded = stowage.load(parts)
    reference = stowage.load(single)
    assert set(loaded) == set(reference)
    for k, v in reference.items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(loaded[k], v), k


# The process's own peak, VmHWM (getrusage's ru_maxrss would carry the
# forking parent's over exec).
PEAK_CHILD = """
import sys
import stowage
said = stowage.convert(sys.argv[1], sys.argv[2], to=sys.argv[3], max_shard_size="100MB",
                       rank=int(sys.argv[4]), world=int(sys.argv[5]))
print(said)
with open("/proc/self/status") as f:
    print("peak", next(int(l.split()[1]) << 10 for l in f if l.startswith("VmHWM:")))
"""


def test_rank_partitioned_conversion_holds_memory_to_the_largest_tensor(tmp_path):
    """Each process of a rank-partitioned conversion of a 576 MiB DCP peaks
    under its largest tensor (48 MiB) plus 256 MiB, at 1, 2 and 4 processes,
    to a sharded set and to a DCP; the outputs load equal to the source."""
    import torch.distributed.checkpoint as dcp

    largest = 48 << 20
    state = {f"layers.{i}.weight": torch.full((largest // 4 // 1024, 1024), float(i)) for i in range(12)}
    src = tmp_path / "src"
    dcp.save(state, storage_writer=dcp.FileSystemWriter(src), no_dist=True)
    for to in ("safetensors", "dcp"):
        for world in (1, 2, 4):
            out = tmp_path / f"{to}-{world}"
            procs = [subprocess.Popen([sys.executable, "-c", PEAK_CHILD, src, out, to, str(r), str(world)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for r in range(world)]
            for r, p in enumerate(procs):
                stdout, stderr = p.communicate(timeout=300)
                assert p.returncode == 0, f"{to}, rank {r} of {world}: {stderr}"
                peak = int(stdout.split("peak")[-1])
                assert peak < largest + (256 << 20), f"{to}, rank {r} of {world}: peak {peak >> 20} MiB"
            loaded = stowage.load(out)
            assert set(loaded) == set(state)
            for k, v in state.items():
                assert torch.equal(loaded[k], v), (to, world, k)
            del loaded
            # Six outputs of 576 MiB need not sit on the disk at once.
            shutil.rmtree(out)


def _model_and_optimizer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(5, 4)).sum().backward()
    optim.step()
    return model, optim


def test_a_dcp_source_lists_exactly_its_metadatas_keys(tmp_path):
    """An optimizer's state as `get_state_dict` gives it, saved by PyTorch's
    FileSystemWriter: stowage's reader names every item as `.metadata` does
    (`optim.param_groups.0.lr`, not `optim.param_groups`), so `dcp.load`
    with a template built from that metadata loads every value."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    from stowage.dcp import StorageReader

    model, optim = _model_and_optimizer()
    model_sd, optim_sd = get_state_dict(model, optim)
    out = tmp_path / "ckpt"
    dcp.save({"model": model_sd, "optim": optim_sd}, storage_writer=dcp.FileSystemWriter(out), no_dist=True)
    theirs = dcp.FileSystemReader(out).read_metadata().state_dict_metadata
    ours = StorageReader(out).read_metadata().state_dict_metadata
    assert sorted(ours) == sorted(theirs)
    assert "optim.param_groups.0.lr" in ours
    for name, entry in theirs.items():
        assert type(ours[name]) is type(entry), name
    # A template of every key: tensors of the saved shapes, values as None.
    template = {
        name: torch.zeros(entry.size, dtype=entry.properties.dtype) if hasattr(entry, "size") else None
        for name, entry in theirs.items()
    }
    dcp.load(template, storage_reader=StorageReader(out), no_dist=True)
    assert template["optim.param_groups.0.lr"] == optim_sd["param_groups"][0]["lr"]
    assert template["optim.param_groups.0.params"] == optim_sd["param_groups"][0]["params"]
    assert torch.equal(template["model.0.weight"], model_sd["0.weight"])


def test_any_other_source_is_named_as_flatten_state_dict_names_it(tmp_path):
    """A `.pt` holding a model and an optimizer's state: the reader's keys
    are exactly what PyTorch's own `flatten_state_dict` makes of it."""
    from torch.distributed.checkpoint._nested_dict import flatten_state_dict

    from stowage.dcp import StorageReader

    model, optim = _model_and_optimizer()
    saved = {"model": model.state_dict(), "optim": optim.state_dict(), "epoch": 3, "tags": ["a", "b"]}
    src = tmp_path / "ckpt.pt"
    torch.save(saved, src)
    flat, _ = flatten_state_dict(torch.load(src, weights_only=True))
    ours = StorageReader(src).read_metadata().state_dict_metadata
    assert sorted(ours) == sorted(flat)
    assert "optim.param_groups.0.betas" in ours and "tags" in ours


_DYING_SAVE = """
import os, sys, time
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from stowage.dcp import StorageWriter

out, step, writer = sys.argv[1], int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo")
rank = dist.get_rank()
state = {f"w{rank}": torch.full((1024,), float(step))}
Writer = StorageWriter if writer == "stowage" else dcp.FileSystemWriter
if step == 2 and rank == 1:
    def dying(self, plan, planner):
        time.sleep(3)  # rank 0 writes its file meanwhile
        os._exit(1)
    Writer.write_data = dying
dcp.save(state, storage_writer=Writer(out))
dist.barrier()
dist.destroy_process_group()
"""


def test_a_rank_dying_in_a_save_over_a_checkpoint_leaves_the_earlier_one_whole(tmp_path):
    """2 ranks save step 1, then rank 1 dies in `write_data` of step 2's
    save over it (NeMo-RL #3312): every load gives step 1 whole, never rank
    0's tensor of step 2 beside rank 1's of step 1."""
    import torch.distributed.checkpoint as dcp

    from stowage.dcp import StorageReader

    worker = tmp_path / "worker.py"
    worker.write_text(_DYING_SAVE)
    out = tmp_path / "ckpt"

    def save(step):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
               str(worker), str(out), str(step), "stowage"]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)

    assert save(1).returncode == 0
    assert save(2).returncode != 0
    step1 = {"w0": torch.full((1024,), 1.0), "w1": torch.full((1024,), 1.0)}
    loaded = stowage.load(out)
    assert all(torch.equal(loaded[k], v) for k, v in step1.items()), loaded
    for reader in (StorageReader(out), dcp.FileSystemReader(out)):
        back = {k: torch.zeros(1024) for k in step1}
        dcp.load(back, storage_reader=reader, no_dist=True)
        assert all(torch.equal(back[k], v) for k, v in step1.items()), (reader, back)
    # A save that succeeds replaces it whole, and leaves no file of the
    # earlier one behind.
    state = {"w0": torch.full((1024,), 3.0), "w1": torch.full((1024,), 3.0)}
    from stowage.dcp import StorageWriter

    dcp.save(state, storage_writer=StorageWriter(out), no_dist=True)
    loaded = stowage.load(out)
    assert all(torch.equal(loaded[k], v) for k, v in state.items())
    named = {i.relative_path for i in dcp.FileSystemReader(out).read_metadata().storage_data.values()}
    assert {p.name for p in out.iterdir() if p.name.endswith(".distcp")} == named


def test_reader_and_writer_take_the_file_system_classes_arguments(tmp_path):
    """StorageWriter and StorageReader are called as FileSystemWriter and
    FileSystemReader are: every public parameter by the same name and
    default (an option that changes nothing here is taken; one stowage
    cannot honour is a ValueError), and overwrite=False refuses a folder
    that holds a checkpoint, as FileSystemWriter does."""
    import inspect

    import torch.distributed.checkpoint as dcp

    from stowage.dcp import StorageReader, StorageWriter

    for ours, theirs in ((StorageWriter, dcp.FileSystemWriter), (StorageReader, dcp.FileSystemReader)):
        mine = inspect.signature(ours.__init__).parameters
        for name, p in inspect.signature(theirs.__init__).parameters.items():
            if name.startswith("_") or name in ("self", "serialization_format"):
                continue
            assert name in mine, (ours.__name__, name)
            assert mine[name].default == p.default, (ours.__name__, name)
            assert mine[name].kind == p.kind, (ours.__name__, name)

    state = {"w": torch.arange(6.0), "epoch": 3}
    out = tmp_path / "c"
    writer = StorageWriter(path=out, single_file_per_rank=True, sync_files=False, thread_count=2,
                           per_thread_copy_ahead=1 << 20, cache_staged_state_dict=False, overwrite=False)
    dcp.save(state, storage_writer=writer, no_dist=True)
    back = {"w": torch.zeros(6), "epoch": 0}
    dcp.load(back, storage_reader=StorageReader(path=out), no_dist=True)
    assert torch.equal(back["w"], state["w"]) and back["epoch"] == 3
    # DCP wraps a rank's error in a CheckpointException, as it wraps
    # FileSystemWriter's.
    from torch.distributed.checkpoint.api import CheckpointException

    with pytest.raises(CheckpointException, match="overwrite=False"):
        dcp.save(state, storage_writer=StorageWriter(out, overwrite=False), no_dist=True)
    dcp.save(state, storage_writer=StorageWriter(out), no_dist=True)  # overwrite=True, the default
    with pytest.raises(ValueError, match="single_file_per_rank=False"):
        StorageWriter(out, single_file_per_rank=False)
