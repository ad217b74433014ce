"""stowage.save, read back by torch.load(weights_only=True)."""

import collections
import json

import numpy as np
import pytest
import safetensors.torch
import torch

import stowage
from _compare import assert_same, sharing


def test_save_then_torch_load_is_identical_sharing_included(tmp_path):
    base = torch.arange(24, dtype=torch.float32)
    model = torch.nn.Linear(3, 2)
    obj = {
        "base": base,
        "view": base[4:16].view(3, 4),
        "t": base.view(4, 6).t(),
        "w": model.weight,
        "bf": torch.ones(3, dtype=torch.bfloat16),
        "ints": torch.arange(5),
        "empty": torch.empty(0),
        "scalar": torch.tensor(2.5),
        "g": torch.ones(2, requires_grad=True),
        "epoch": 7,
        "cfg": {"lr": 0.1, "name": "x", "betas": (0.9, 0.99), "raw": b"\x01", "none": None, "c": 1 + 2j},
        "dtype": torch.float16,
        "size": torch.Size([2, 3]),
        "device": torch.device("cpu"),
        "sd": collections.OrderedDict([("a", torch.zeros(2)), ("b", torch.ones(2))]),
        "list": [base[:3], [True, False]],
    }
    path = tmp_path / "out.pt"
    stowage.save(obj, path)
    back = torch.load(path, weights_only=True)
    groups = assert_same(back, obj)
    assert sharing(groups[0]) == sharing(groups[1])
    assert back["view"].untyped_storage().data_ptr() == back["base"].untyped_storage().data_ptr()
    assert type(back["w"]) is torch.nn.Parameter
    # And stowage reads its own file back the same.
    assert_same(stowage.load(path), obj)


def test_torch_load_of_a_state_dict_loads_into_a_model(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    path = tmp_path / "sd.pt"
    stowage.save(model.state_dict(), path)
    other = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    other.load_state_dict(torch.load(path, weights_only=True))
    x = torch.randn(2, 4)
    assert torch.equal(model(x), other(x))


def test_a_state_dicts_metadata_is_saved_as_torch_saves_it(tmp_path):
    # `_metadata` holds each module's version, which load_state_dict hands to
    # _load_from_state_dict (BatchNorm upgrades old files by it).
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    sd = model.state_dict()
    stowage.save(sd, tmp_path / "sd.pt")
    torch.save(sd, tmp_path / "torch.pt")
    back = torch.load(tmp_path / "sd.pt", weights_only=True)
    assert back._metadata == sd._metadata == torch.load(tmp_path / "torch.pt", weights_only=True)._metadata
    assert isinstance(back._metadata, collections.OrderedDict)
    # Inside a training checkpoint, and through stowage's own load.
    stowage.save({"model": sd, "step": 3}, tmp_path / "ckpt.pt")
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["model"]._metadata == sd._metadata
    assert stowage.load(tmp_path / "ckpt.pt")["model"]._metadata == sd._metadata
    # A plain OrderedDict gets no state.
    stowage.save(collections.OrderedDict(w=torch.ones(1)), tmp_path / "plain.pt")
    assert not hasattr(torch.load(tmp_path / "plain.pt", weights_only=True), "_metadata")


def test_numpy_arrays_sharing_a_buffer_are_one_storage(tmp_path):
    base = np.arange(12, dtype=np.float32)
    obj = {"base": base, "view": base[2:8].reshape(2, 3), "strided": base[::3], "other": np.ones(2, np.int16)}
    path = tmp_path / "np.pt"
    stowage.save(obj, path)
    back = torch.load(path, weights_only=True)
    for k, a in obj.items():
        assert np.array_equal(back[k].numpy(), a), k
    ptr = back["base"].untyped_storage().data_ptr()
    assert back["view"].untyped_storage().data_ptr() == ptr
    assert back["strided"].untyped_storage().data_ptr() == ptr
    assert back["other"].untyped_storage().data_ptr() != ptr


def test_safetensors_by_extension(tmp_path):
    from safetensors.torch import load_file

    obj = {"a": torch.arange(6.0).view(2, 3), "b": torch.ones(2, dtype=torch.int64)}
    path = tmp_path / "m.safetensors"
    stowage.save(obj, path)
    back = load_file(path)
    assert set(back) == {"a", "b"}
    assert torch.equal(back["a"], obj["a"]) and torch.equal(back["b"], obj["b"])


def test_an_unsaveable_value_names_its_path_and_leaves_the_old_file(tmp_path):
    path = tmp_path / "keep.pt"
    torch.save({"old": torch.ones(1)}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError, match=r"builtin_function_or_method at cfg\.fn"):
        stowage.save({"cfg": {"fn": len}}, path)
    with pytest.raises(TypeError, match="no torch dtype"):
        stowage.save({"text": np.array(["ab"])}, path)
    assert path.read_bytes() == before


def test_folders_sharded_sets_and_distributed_checkpoints(tmp_path):
    from safetensors.torch import load_file

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    sd = model.state_dict()
    stowage.save(sd, tmp_path / "set", to="safetensors", max_shard_size="60B")
    index = json.loads((tmp_path / "set" / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1
    got = {}
    for shard in shards:
        got.update(load_file(tmp_path / "set" / shard))
    assert got.keys() == sd.keys() and all(torch.equal(got[k], sd[k]) for k in sd)
    # A training checkpoint keeps its structure and values in the set.
    ckpt = {"model": sd, "epoch": 3, "lr": [0.1, 0.01]}
    stowage.save(ckpt, tmp_path / "bin", to="bin")
    back = stowage.load(tmp_path / "bin")
    assert back["epoch"] == 3 and back["lr"] == [0.1, 0.01]
    assert all(torch.equal(back["model"][k], sd[k]) for k in sd)
    # DCP: PyTorch's own converter reads it back.
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    stowage.save(ckpt, tmp_path / "dcp", to="dcp")
    dcp_to_torch_save(tmp_path / "dcp", tmp_path / "from_dcp.pt")
    viaTorch = torch.load(tmp_path / "from_dcp.pt", weights_only=True)
    assert viaTorch["epoch"] == 3
    assert all(torch.equal(viaTorch["model"][k], sd[k]) for k in sd)
    with pytest.raises(ValueError):
        stowage.save(sd, tmp_path / "x", to="zip")
    with pytest.raises(ValueError):
        stowage.save(sd, tmp_path / "x.pt", max_shard_size="1GB")


def test_save_and_convert_follow_one_rule_for_names(tmp_path):
    """stowage.save and `stowage convert` resolve a destination by the
    library's one rule: they write and refuse the same names, refusing with
    the same error and message (issue 39, item 4)."""
    sd = {"w": torch.arange(4.0)}
    src = tmp_path / "in.pt"
    torch.save(sd, src)
    for name in ("out.weights", "out.safetensor", "out"):
        with pytest.raises(ValueError) as saved:
            stowage.save(sd, tmp_path / name)
        with pytest.raises(ValueError) as converted:
            stowage.convert(src, tmp_path / name)
        assert str(saved.value) == str(converted.value), (saved.value, converted.value)
        assert "cannot tell the format to write" in str(saved.value)
        assert not (tmp_path / name).exists()
    # checkpoint.pth.tar and .pkl are torch zips, as torch.save writes them.
    for name in ("checkpoint.pth.tar", "model.pkl"):
        stowage.save(sd, tmp_path / ("saved-" + name))
        stowage.convert(src, tmp_path / ("converted-" + name))
        for made in ("saved-", "converted-"):
            back = torch.load(tmp_path / (made + name), weights_only=True)
            assert torch.equal(back["w"], sd["w"])
    # A file named for the folder format given stays that file.
    stowage.save(sd, tmp_path / "one.safetensors", to="safetensors")
    assert (tmp_path / "one.safetensors").is_file()
    with pytest.raises(ValueError, match="folder format"):
        stowage.save(sd, tmp_path / "x", to="zip")


def test_a_counter_round_trips_as_torch_saves_it(tmp_path):
    """A collections.Counter is saved as torch.save saves it, read back a
    Counter by torch.load(weights_only=True) and by stowage, and kept by a
    conversion to .pt (issue 40, item 5)."""
    import collections

    obj = {"vocab": collections.Counter({"a": 3, "b": 1}), "w": torch.ones(2)}
    stowage.save(obj, tmp_path / "s.pt")
    back = torch.load(tmp_path / "s.pt", weights_only=True)
    assert type(back["vocab"]) is collections.Counter and back["vocab"] == obj["vocab"]
    torch.save(obj, tmp_path / "t.pt")
    assert type(stowage.load(tmp_path / "t.pt")["vocab"]) is collections.Counter
    stowage.convert(tmp_path / "t.pt", tmp_path / "c.pt")
    again = torch.load(tmp_path / "c.pt", weights_only=True)
    assert type(again["vocab"]) is collections.Counter and again["vocab"] == obj["vocab"]


def test_save_writes_big_ints_and_ml_dtypes_arrays_as_torch_does(tmp_path):
    """Python ints past 64 bits, and numpy arrays of ml_dtypes' bfloat16 and
    float8 types, which torch.save writes and torch holds, are saved and
    read back exactly by torch.load(weights_only=True) (issue 40, item 5)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    big = {"pos": 2**100 + 7, "neg": -(2**70), "edge": 2**63, "min": -(2**63) - 1, "byte": -(2**71)}
    stowage.save(big, tmp_path / "ints.pt")
    assert torch.load(tmp_path / "ints.pt", weights_only=True) == big
    assert stowage.load(tmp_path / "ints.pt") == big
    # Past the 4,300 decimal digits Python's str() allows: saved as
    # torch.save pickles them (LONG4, which torch's weights-only loader
    # refuses, so the file is read back with pickle's own), loaded and
    # listed exactly, hex past that limit.
    huge = {"pos": 7**300_000, "neg": -(3**20_000) + 1}
    stowage.save(huge, tmp_path / "huge.pt")
    assert torch.load(tmp_path / "huge.pt", weights_only=False) == huge  # our own file
    torch.save(huge, tmp_path / "huge_torch.pt")
    assert stowage.load(tmp_path / "huge_torch.pt") == huge
    listed = {v["path"][0]: v["value"] for v in stowage.inspect(tmp_path / "huge_torch.pt")["values"]}
    assert listed == {"pos": hex(huge["pos"]), "neg": hex(huge["neg"])}
    small = stowage.inspect(tmp_path / "ints.pt")["values"]
    assert {v["path"][0]: v["value"] for v in small}["pos"] == str(2**100 + 7)
    values = np.array([0.5, -2.0, 3.0], dtype=np.float32)
    arrays = {name: values.astype(getattr(ml_dtypes, name)) for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2")}
    stowage.save(arrays, tmp_path / "ml.pt")
    back = torch.load(tmp_path / "ml.pt", weights_only=True)
    for name, a in arrays.items():
        t = back[name]
        assert t.dtype == getattr(torch, name), name
        assert bytes(t.view(torch.uint8).numpy()) == a.tobytes(), name
    with pytest.raises(TypeError, match="no torch dtype"):
        stowage.save({"s": np.array(["ab"])}, tmp_path / "s.pt")


def test_lazy_conjugate_and_negative_bits_are_saved_as_torch_saves_them(tmp_path):
    """A tensor with a lazy conjugate or negative bit: written as torch.save
    writes it (the storage's elements and the bit), read back with the bit
    set; converted to safetensors or a DCP, its values."""
    z = torch.randn(2, 3, dtype=torch.complex64)
    x = torch.randn(5)
    obj = {"conj": z.conj(), "conj_t": z.t().conj(), "neg": x._neg_view(), "plain": z}
    stowage.save(obj, tmp_path / "bits.pt")
    back = torch.load(tmp_path / "bits.pt", weights_only=True)
    for k, v in obj.items():
        assert back[k].is_conj() == v.is_conj() and back[k].is_neg() == v.is_neg(), k
        assert torch.equal(back[k], v), k
    # The conjugate shares its storage with the plain tensor, as in memory.
    assert back["conj"].untyped_storage().data_ptr() == back["plain"].untyped_storage().data_ptr()
    stowage.save(obj, tmp_path / "bits.safetensors")
    flat = safetensors.torch.load_file(tmp_path / "bits.safetensors")
    assert all(torch.equal(flat[k], v.resolve_conj().resolve_neg()) for k, v in obj.items())


def test_what_is_reached_twice_is_saved_once(tmp_path):
    """The encoder memoises as pickle does: a structure of 41 objects and
    2^40 paths saves at once, small, and a dict referenced from two places
    comes back from `torch.load` as one dict (issue 43, item 1)."""
    level = {"a": 1}
    for _ in range(40):
        level = [level, level]
    config = {"lr": 1e-3}
    path = tmp_path / "shared.pt"
    stowage.save({"root": level, "x": config, "y": config, "t": torch.ones(2)}, path)
    assert path.stat().st_size < 20_000
    back = torch.load(path, weights_only=True)
    assert back["x"] is back["y"] and back["x"] == config
    node = back["root"]
    for _ in range(40):
        assert node[0] is node[1]
        node = node[0]
    assert node == {"a": 1}


def test_a_container_that_holds_itself_is_refused_by_name(tmp_path):
    """`torch.save` writes a reference cycle; stowage's values are built
    bottom-up and cannot hold one: a ValueError naming the place, and
    nothing written (before: a walk 2,000 deep and a TypeError)."""
    d = {"w": torch.ones(2)}
    d["again"] = {"inner": d}
    path = tmp_path / "cycle.pt"
    with pytest.raises(ValueError, match=r"the dict at again\.inner: it holds itself \(a reference cycle\)"):
        stowage.save(d, path)
    assert not path.exists()
    with pytest.raises(ValueError, match="reference cycle"):
        stowage.manifest(d)
    # A container reached twice without a cycle is saved once, as before.
    shared = {"x": torch.zeros(1)}
    stowage.save({"a": shared, "b": shared}, path)
    back = torch.load(path, weights_only=True)
    assert back["a"] is back["b"]


def test_a_tensors_attributes_are_saved_as_torch_saves_them(tmp_path):
    """Python attributes on a tensor or a parameter are written as torch.save
    writes them, so torch.load sets them back (before: silently dropped)."""
    t = torch.ones(3)
    t.note = "calibrated"
    p = torch.nn.Parameter(torch.ones(2))
    p.tag = 3
    sd = {"t": t, "p": p, "plain": torch.zeros(1)}
    path = tmp_path / "attrs.pt"
    stowage.save(sd, path)
    for back in (torch.load(path, weights_only=True), stowage.load(path)):
        assert vars(back["t"]) == {"note": "calibrated"}
        assert type(back["p"]) is torch.nn.Parameter and vars(back["p"]) == {"tag": 3}
        assert vars(back["plain"]) == {}
        assert torch.equal(back["t"], t) and torch.equal(back["p"], p)


def test_a_tensor_subclass_is_refused_not_written_as_a_plain_tensor(tmp_path):
    class Calibrated(torch.Tensor):
        pass

    x = torch.ones(2).as_subclass(Calibrated)
    path = tmp_path / "sub.pt"
    with pytest.raises(TypeError, match=r"a tensor subclass \(.*Calibrated\)"):
        stowage.save({"x": x}, path)
    assert not path.exists()


def test_what_save_refuses_is_named_with_what_it_writes(tmp_path):
    """A value stowage.save does not write is a TypeError naming it, its
    place and what the save writes (before: a claim that torch could not
    read it back, false for a set); a quantized or sparse tensor is named as
    such."""
    path = tmp_path / "x.pt"
    with pytest.raises(TypeError, match=r"cannot save the set at cfg\.tags: stowage\.save writes dicts, "):
        stowage.save({"cfg": {"tags": {"a", "b"}}}, path)
    q = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.quint8)
    with pytest.raises(TypeError, match=r"a quantized tensor \(torch\.quint8\)"):
        stowage.save({"q": q}, path)
    with pytest.raises(TypeError, match=r"a torch\.sparse_coo tensor: stowage\.save writes strided"):
        stowage.save({"s": torch.ones(2).to_sparse()}, path)
    assert not path.exists()


def test_an_attribute_no_checkpoint_holds_leaves_the_tensor_saved_with_a_warning(tmp_path):
    """A tensor whose attribute is a function (no checkpoint value holds
    one) is saved without its attributes, with a warning naming the place;
    the save does not fail (it did not before attributes were saved)."""
    t = torch.ones(2)
    t.fn = print
    for name in ("fn.safetensors", "fn.pt"):
        with pytest.warns(UserWarning, match=r"a tensor's attributes are not saved: cannot save the .* at t\.__dict__\.fn"):
            stowage.save({"t": t}, tmp_path / name)
        back = stowage.load(tmp_path / name)
        assert torch.equal(back["t"], t) and vars(back["t"]) == {}
