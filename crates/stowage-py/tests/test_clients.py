"""Real clients nobody here wrote, reading what stowage writes and loads:
transformers' `from_pretrained` on a tiny model built from a config (no
network), and `load_state_dict(assign=True)` on a model made on the meta
device, as transformers and accelerate initialise big models."""

import shutil

import pytest
import torch

import stowage

import _torchrun

transformers = pytest.importorskip("transformers", reason="scripts/ci-python.sh installs transformers")


def _tiny(tmp_path):
    """A GPT-2 of two layers built from a config, saved by transformers
    (`model.safetensors` and `config.json`) and by `torch.save` of its state
    dict (`pytorch_model.bin`, the head tied to the embedding), and a batch
    of ids."""
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=97, n_positions=32, bos_token_id=0, eos_token_id=0
    )
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    src = tmp_path / "src"
    model.save_pretrained(src)
    torch.save(model.state_dict(), src / "pytorch_model.bin")
    ids = torch.randint(0, 97, (2, 16), generator=torch.Generator().manual_seed(1))
    return model, src, ids


def _logits(model, ids):
    with torch.no_grad():
        return model(ids).logits


@pytest.mark.parametrize(
    "form", ["model.safetensors", "pytorch_model.bin", "sharded-safetensors", "sharded-bin", "dcp-to-safetensors"]
)
def test_from_pretrained_loads_every_form_stowage_writes(tmp_path, form):
    model, src, ids = _tiny(tmp_path)
    out = tmp_path / "out"
    weights = src / "pytorch_model.bin"
    if form in ("model.safetensors", "pytorch_model.bin"):
        out.mkdir()
        stowage.convert(weights, out / form)
    elif form == "dcp-to-safetensors":
        # Through a distributed checkpoint and back to a set.
        stowage.convert(weights, tmp_path / "dcp", to="dcp", ranks=3)
        stowage.convert(tmp_path / "dcp", out, to="safetensors", max_shard_size="40KB")
    else:
        stowage.convert(weights, out, to=form.split("-")[1], max_shard_size="40KB")
    shutil.copy(src / "config.json", out / "config.json")
    loaded = transformers.GPT2LMHeadModel.from_pretrained(out).eval()
    assert torch.equal(_logits(loaded, ids), _logits(model, ids))


def test_from_pretrained_loads_what_stowage_save_writes(tmp_path):
    model, src, ids = _tiny(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    state = stowage.load(src / "pytorch_model.bin")
    stowage.save(state, out / "model.safetensors")
    shutil.copy(src / "config.json", out / "config.json")
    loaded = transformers.GPT2LMHeadModel.from_pretrained(out).eval()
    assert torch.equal(_logits(loaded, ids), _logits(model, ids))


@pytest.mark.parametrize("mode", ["mmap", "lazy"])
@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.safetensors"])
def test_mmap_and_lazy_loads_are_assigned_into_a_meta_model(tmp_path, name, mode):
    model, src, ids = _tiny(tmp_path)
    path = src / name
    with torch.device("meta"):
        empty = transformers.GPT2LMHeadModel(model.config)
    state = stowage.load(path, **{mode: True})
    missing, unexpected = empty.load_state_dict(state, assign=True, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    empty.tie_weights()
    assert not any(p.is_meta for p in empty.parameters())
    assert torch.equal(_logits(empty.eval(), ids), _logits(model, ids))


_DCP_ROUND_TRIP = """
import sys
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from stowage.dcp import StorageReader, StorageWriter

out = sys.argv[1]
dist.init_process_group("gloo")


def make(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(3, 8)).sum().backward()
    optim.step()
    optim.zero_grad()
    return model, optim


def same(a, b, at):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), at
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), at
        for k in a:
            same(a[k], b[k], f"{at}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), at
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{at}.{i}")
    else:
        assert a == b, (at, a, b)


model, optim = make(0)
msd, osd = get_state_dict(model, optim)
dcp.save({"model": msd, "optim": osd}, storage_writer=StorageWriter(f"{out}/stowage"))
dcp.save({"model": msd, "optim": osd}, storage_writer=dcp.FileSystemWriter(f"{out}/torch"))
for written in ("stowage", "torch"):
    for Reader in (StorageReader, dcp.FileSystemReader):
        other, other_optim = make(1)
        back_m, back_o = get_state_dict(other, other_optim)
        back = {"model": back_m, "optim": back_o}
        dcp.load(back, storage_reader=Reader(f"{out}/{written}"))
        set_state_dict(other, other_optim, model_state_dict=back["model"], optim_state_dict=back["optim"])
        at = f"written by {written}, read by {Reader.__name__}"
        same(model.state_dict(), other.state_dict(), at)
        same(optim.state_dict(), other_optim.state_dict(), at)
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_a_model_and_adamw_round_trip_through_dcp_under_torchrun(tmp_path, world):
    """`get_state_dict`, `dcp.save`, `dcp.load` and `set_state_dict`, as a
    training job checkpoints: stowage's writer and reader, each against
    PyTorch's `FileSystemWriter`/`FileSystemReader`, give back the model and
    the AdamW state exactly, at every world size."""
    worker = tmp_path / "worker.py"
    worker.write_text(_DCP_ROUND_TRIP)
    _torchrun.torchrun(world, worker, tmp_path / "out")
