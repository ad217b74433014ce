"""stowage.load(lazy=True): each storage is read on first use, from a file
or a URL, and the tensors are then what an eager load gives, sharing kept."""

import collections
import copy

import numpy as np
import pytest
import torch

import stowage
from _compare import assert_same, sharing
from test_load import ALL, FIXTURES_DIR, torch_loads


def loaded(obj, seen=None):
    """obj with every LazyDict made the plain dict it stands for, every
    tensor read (sharing kept)."""
    seen = {} if seen is None else seen
    if id(obj) in seen:
        return seen[id(obj)]
    if isinstance(obj, stowage.LazyDict):
        plain = collections.OrderedDict() if isinstance(obj, collections.OrderedDict) else {}
        seen[id(obj)] = plain
        for k in list(obj):
            plain[k] = loaded(obj[k], seen)
        if hasattr(obj, "_metadata"):
            plain._metadata = obj._metadata
        return plain
    if isinstance(obj, dict):
        seen[id(obj)] = obj
        for k in list(obj):
            obj[k] = loaded(obj[k], seen)
        return obj
    if isinstance(obj, list):
        seen[id(obj)] = obj
        obj[:] = [loaded(x, seen) for x in obj]
        return obj
    if type(obj) is tuple:
        return tuple(loaded(x, seen) for x in obj)
    return obj


def unread(obj, out=None, seen=None):
    """The paths of the entries of every LazyDict in obj not read yet."""
    out = [] if out is None else out
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return out
    seen.add(id(obj))
    if isinstance(obj, stowage.LazyDict):
        out.extend(obj.unread())
        for k in obj:
            if k not in obj.unread():
                unread(obj[k], out, seen)
    elif isinstance(obj, dict):
        for v in obj.values():
            unread(v, out, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            unread(v, out, seen)
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
    assert isinstance(sd, dict) and isinstance(sd, stowage.LazyDict)
    assert sorted(sd.unread()) == ["a", "a_view", "b"] and len(sd) == 3 and "a" in sd
    before = read_bytes()
    view = sd["a_view"]  # reading the view reads its storage, a's
    used = read_bytes() - before
    assert (32 << 20) <= used < (33 << 20), used
    assert type(view) is torch.Tensor and view.storage_offset() == 1000 and float(view[0]) == 1000.0
    assert sd.unread() == ["b"]
    before = read_bytes()
    a = sd["a"]
    assert read_bytes() - before < 4096, "a storage was read twice"
    assert torch.equal(a, big) and sd["a"] is a and sd.get("a") is a
    # Views of one storage share it; a write shows through.
    assert a.untyped_storage().data_ptr() == view.untyped_storage().data_ptr()
    a[1000] = -5.0
    assert view[0].item() == -5.0
    assert torch.equal(sd["b"], big) and sd.unread() == []


def test_a_lazy_state_dict_goes_where_a_state_dict_goes(tmp_path):
    import safetensors.torch

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)
    x = torch.randn(5, 3)
    # Into a meta-initialised model, as transformers and accelerate load.
    with torch.device("meta"):
        other = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    sd = stowage.load(path, lazy=True)
    assert isinstance(sd, collections.OrderedDict) and hasattr(sd, "_metadata")
    other.load_state_dict(sd, assign=True)
    assert all(type(p) is torch.nn.Parameter and not p.is_meta for p in other.parameters())
    assert torch.equal(other(x), model(x))
    # Copied into an existing model.
    fresh = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    fresh.load_state_dict(stowage.load(path, lazy=True))
    assert torch.equal(fresh(x), model(x))
    # Every value a tensor, to every caller.
    sd = stowage.load(path, lazy=True)
    assert all(isinstance(v, torch.Tensor) for v in sd.values())
    assert all(isinstance(v, torch.Tensor) for v in dict(stowage.load(path, lazy=True)).values())
    assert all(isinstance(v, torch.Tensor) for v in {**stowage.load(path, lazy=True)}.values())
    # safetensors' writer, torch's, and stowage's own.
    safetensors.torch.save_file(stowage.load(path, lazy=True), tmp_path / "m.safetensors")
    back = safetensors.torch.load_file(tmp_path / "m.safetensors")
    assert all(torch.equal(back[k], v) for k, v in model.state_dict().items())
    torch.save(stowage.load(path, lazy=True), tmp_path / "again.pt")
    again = torch.load(tmp_path / "again.pt", weights_only=True)
    assert type(again) is collections.OrderedDict and hasattr(again, "_metadata")
    assert all(torch.equal(again[k], v) for k, v in model.state_dict().items())
    stowage.save(stowage.load(path, lazy=True), tmp_path / "own.pt")
    own = torch.load(tmp_path / "own.pt", weights_only=True)
    assert type(own) is collections.OrderedDict
    assert all(torch.equal(own[k], v) for k, v in model.state_dict().items())


def test_plain_dicts_stay_dicts_and_shared_tensors_one_object(tmp_path):
    x, y = torch.arange(4.0), torch.ones(2)
    path = tmp_path / "shared.pt"
    torch.save({"a": x, "b": x, "nested": {"c": x, "d": y}, "cfg": {"lr": 0.1}, "l": [y, 3]}, path)
    sd = stowage.load(path, lazy=True)
    assert type(sd) is not dict and isinstance(sd, dict) and not isinstance(sd, collections.OrderedDict)
    assert type(sd["cfg"]) is dict, "a dict of no tensors is left as it is"
    assert isinstance(sd["nested"], stowage.LazyDict) and sd["nested"].unread() == ["c", "d"]
    assert sd["a"] is sd["b"] is sd["nested"]["c"]
    # A list is read whole with its entry, its tensors shared as saved.
    assert sd["l"][0] is sd["nested"]["d"] and sd["l"][1] == 3 and sd["l"] is sd["l"]
    # Copies stay lazy and share what either reads; a deep copy is plain.
    sd = stowage.load(path, lazy=True)
    shallow = sd.copy()
    assert isinstance(shallow, stowage.LazyDict) and shallow["a"] is sd["a"]
    deep = copy.deepcopy(stowage.load(path, lazy=True))
    assert type(deep) is dict and torch.equal(deep["a"], x) and deep["a"] is deep["b"]
    merged = stowage.load(path, lazy=True) | {"e": 1}
    assert type(merged) is dict and type(merged["a"]) is torch.Tensor


def test_what_cannot_wait_is_read_by_the_load(tmp_path):
    path = tmp_path / "root.pt"
    torch.save([torch.ones(2), {"w": torch.zeros(3)}], path)
    got = stowage.load(path, lazy=True)
    assert type(got) is list and type(got[0]) is torch.Tensor
    assert isinstance(got[1], stowage.LazyDict) and got[1].unread() == ["w"]
    torch.save(torch.ones(3), path)
    assert type(stowage.load(path, lazy=True)) is torch.Tensor


def test_parameters_and_numpy_lazily(tmp_path):
    path = tmp_path / "p.pt"
    torch.save({"w": torch.nn.Parameter(torch.ones(2, 2)), "g": torch.zeros(3, requires_grad=True)}, path)
    sd = stowage.load(path, lazy=True)
    assert isinstance(sd["w"], torch.nn.Parameter) and sd["w"].requires_grad
    assert sd["g"].requires_grad
    arrays = stowage.load(path, framework="numpy", lazy=True)
    assert arrays.unread() == ["w", "g"]
    assert isinstance(arrays["w"], np.ndarray) and arrays["w"].dtype == np.float32 and arrays["w"].sum() == 4.0


def test_a_failed_read_at_first_use_names_the_tensor(tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"layer": {"weight": torch.ones(1 << 20)}}, path)
    sd = stowage.load(path, lazy=True)
    with open(path, "r+b") as f:
        f.truncate(4096)
    with pytest.raises(stowage.StowageError, match="layer.weight"):
        sd["layer"]["weight"]
    assert sd["layer"].unread() == ["weight"], "a failed read leaves the entry unread"


def test_lazy_and_mmap_are_one_or_the_other(tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"x": torch.ones(2)}, path)
    with pytest.raises(ValueError, match="choose one"):
        stowage.load(path, lazy=True, mmap=True)


def test_meta_tensors_are_not_lazy(tmp_path):
    path = tmp_path / "t.pt"
    torch.save(collections.OrderedDict(x=torch.ones(2)), path)
    got = stowage.load(path, lazy=True, map_location="meta")
    assert type(got) is collections.OrderedDict
    assert isinstance(got["x"], torch.Tensor) and got["x"].is_meta

