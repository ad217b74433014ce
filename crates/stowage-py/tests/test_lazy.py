"""stowage.load(lazy=True): each storage is read on first use, from a file
or a URL, and the tensors are then what an eager load gives, sharing kept."""

import collections

import numpy as np
import pytest
import torch

import stowage
from _compare import assert_same, sharing
from test_load import ALL, FIXTURES_DIR, torch_loads


def loaded(obj, seen=None):
    """obj with every LazyTensor replaced by its tensor (containers kept)."""
    seen = {} if seen is None else seen
    if id(obj) in seen:
        return seen[id(obj)]
    if isinstance(obj, stowage.LazyTensor):
        return obj.load()
    if isinstance(obj, dict):
        seen[id(obj)] = obj
        for k in list(obj):
            obj[k] = loaded(obj[k], seen)
        if hasattr(obj, "_metadata"):
            loaded(obj._metadata, seen)
        return obj
    if isinstance(obj, list):
        seen[id(obj)] = obj
        obj[:] = [loaded(x, seen) for x in obj]
        return obj
    if type(obj) is tuple:
        return tuple(loaded(x, seen) for x in obj)
    return obj


def lazies(obj, out=None):
    out = [] if out is None else out
    if isinstance(obj, stowage.LazyTensor):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            lazies(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            lazies(v, out)
    return out


def read_bytes():
    """What this process has read so far (rchar: every read and pread)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


@pytest.mark.parametrize("name", ALL)
def test_a_lazy_load_once_used_is_what_torch_load_gives(name):
    path = FIXTURES_DIR / name
    expected, refused = torch_loads(path)
    if refused is not None:
        pytest.skip("torch refuses it")
    got = loaded(stowage.load(path, lazy=True))
    groups = assert_same(got, expected)
    assert sharing(groups[1]) == sharing(groups[0])


def test_nothing_is_read_before_use_and_each_storage_once(tmp_path):
    big = torch.arange(8 << 20, dtype=torch.float32)  # 32 MiB
    path = tmp_path / "two.pt"
    torch.save({"a": big, "a_view": big[1000:2000], "b": big.clone()}, path)
    before = read_bytes()
    sd = stowage.load(path, lazy=True)
    assert read_bytes() - before < (1 << 20), "a lazy load read tensor bytes"
    a, view, b = sd["a"], sd["a_view"], sd["b"]
    assert isinstance(a, stowage.LazyTensor) and not a.is_loaded
    # What is known without a read.
    assert a.shape == torch.Size([8 << 20]) and a.dtype == torch.float32
    assert view.stride() == (1,) and view.storage_offset() == 1000 and a.nbytes == 32 << 20
    before = read_bytes()
    assert float(view[0]) == 1000.0  # using the view reads its storage, a's
    used = read_bytes() - before
    assert (32 << 20) <= used < (33 << 20), used
    assert a.is_loaded and view.is_loaded and not b.is_loaded
    before = read_bytes()
    assert torch.equal(a.load(), big)
    assert read_bytes() - before < 4096, "a storage was read twice"
    assert a.load() is a.load()
    # Views of one storage share it once loaded; a write shows through.
    assert a.load().untyped_storage().data_ptr() == view.load().untyped_storage().data_ptr()
    a[1000] = -5.0
    assert view.load()[0].item() == -5.0


def test_lazy_tensors_work_where_tensors_do(tmp_path):
    model = torch.nn.Linear(3, 2)
    path = tmp_path / "linear.pt"
    torch.save(model.state_dict(), path)
    sd = stowage.load(path, lazy=True)
    other = torch.nn.Linear(3, 2)
    other.load_state_dict(sd)
    assert torch.equal(other.weight, model.weight) and torch.equal(other.bias, model.bias)
    sd = stowage.load(path, lazy=True)
    assert torch.equal(torch.add(sd["bias"], 1), model.bias.detach() + 1)
    assert torch.equal(sd["weight"] @ torch.ones(3), model.weight.detach() @ torch.ones(3))
    assert torch.equal(sd["weight"].sum(dim=0), model.weight.detach().sum(dim=0))
    assert np.array_equal(np.asarray(sd["bias"]), model.bias.detach().numpy())
    assert "LazyTensor(shape=(2, 3), dtype=float32" in repr(stowage.load(path, lazy=True)["weight"])


def test_parameters_and_numpy_lazily(tmp_path):
    path = tmp_path / "p.pt"
    torch.save({"w": torch.nn.Parameter(torch.ones(2, 2)), "g": torch.zeros(3, requires_grad=True)}, path)
    sd = stowage.load(path, lazy=True)
    assert sd["w"].requires_grad and isinstance(sd["w"].load(), torch.nn.Parameter)
    assert sd["g"].load().requires_grad
    arrays = stowage.load(path, framework="numpy", lazy=True)
    assert arrays["w"].dtype == np.float32 and arrays["w"].shape == (2, 2)
    assert isinstance(arrays["w"].load(), np.ndarray) and arrays["w"].load().sum() == 4.0


def test_a_failed_read_at_first_use_names_the_tensor(tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"layer": {"weight": torch.ones(1 << 20)}}, path)
    sd = stowage.load(path, lazy=True)
    with open(path, "r+b") as f:
        f.truncate(4096)
    with pytest.raises(stowage.StowageError, match="layer.weight"):
        sd["layer"]["weight"].load()


def test_lazy_and_mmap_are_one_or_the_other(tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"x": torch.ones(2)}, path)
    with pytest.raises(ValueError, match="choose one"):
        stowage.load(path, lazy=True, mmap=True)


def test_meta_tensors_are_not_lazy(tmp_path):
    path = tmp_path / "t.pt"
    torch.save(collections.OrderedDict(x=torch.ones(2)), path)
    got = stowage.load(path, lazy=True, map_location="meta")
    assert isinstance(got["x"], torch.Tensor) and got["x"].is_meta
