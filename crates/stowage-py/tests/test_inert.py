"""Files torch.load(weights_only=True) refuses, read with inert=True: whole
modules, a Lightning checkpoint, numpy and Python data, TorchScript. Every
tensor torch.load(weights_only=False) finds (the fixtures' expected.json,
written by scripts/make_wild_fixtures.py) is found, bytes and all."""

import collections
import hashlib
import json

import numpy as np
import pytest
import torch

import stowage

WILD = __import__("conftest").FIXTURES / "wild"
FILES = sorted(p.name for p in WILD.iterdir() if p.suffix in (".pt", ".ckpt") and p.with_suffix(".expected.json").exists())


def _tensors(obj, out, seen):
    if id(obj) in seen:
        return out
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, stowage.InertObject):
        _tensors(obj.args, out, seen)
        _tensors(obj.state, out, seen)
    elif isinstance(obj, dict):
        for v in obj.values():
            _tensors(v, out, seen)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            _tensors(v, out, seen)
    return out


def _digest(t):
    t = t.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes()).hexdigest()


@pytest.mark.parametrize("name", FILES)
def test_inert_loads_find_every_tensor_torch_finds(name):
    expected = json.loads((WILD / name).with_suffix(".expected.json").read_text())["tensors"]
    try:
        got = stowage.load(WILD / name, inert=True)
    except stowage.StowageError as e:
        pytest.fail(f"{name}: {e}")
    found = collections.Counter(
        (str(t.dtype).removeprefix("torch."), tuple(t.shape), _digest(t)) for t in _tensors(got, [], set())
    )
    # A TorchScript archive's constants table (`CONSTANTS`, constants.pkl)
    # is the code's, not the module object's that load returns.
    expected = [e for e in expected if e["path"][:1] != ["CONSTANTS"]]
    want = collections.Counter((e["dtype"], tuple(e["shape"]), e["sha256"]) for e in expected)
    missing = want - found
    assert not missing, f"{name}: {sum(missing.values())} of {sum(want.values())} tensors not found"


def test_a_whole_module_is_an_inert_object_with_its_parameters():
    got = stowage.load(WILD / "whole_module.pt", inert=True)
    assert isinstance(got, stowage.InertObject)
    assert got.module.startswith("torch.nn") or got.module
    assert "_parameters" in got.state or "_modules" in got.state


def test_python_data_is_rebuilt_as_torch_rebuilds_it():
    expected = torch.load(WILD / "pydata.pt", weights_only=False)
    got = stowage.load(WILD / "pydata.pt", inert=True)

    # stowage reads a deque as a list and a defaultdict as a dict (their
    # items; nothing is called to make the factory's class).
    def plain(v):
        if isinstance(v, collections.deque):
            v = list(v)
        if isinstance(v, torch.Tensor):
            return ("tensor", v.dtype, tuple(v.shape), _digest(v))
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(plain(x) for x in v)
        return v

    for key, value in expected.items():
        if isinstance(value, (np.ndarray, np.generic)) or type(value).__module__ not in ("builtins", "datetime", "pathlib", "collections"):
            continue
        assert plain(got[key]) == plain(value), key
