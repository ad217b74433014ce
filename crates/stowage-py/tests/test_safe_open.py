"""stowage.safe_open: safetensors' lazy API over every format."""

import numpy as np
import pytest
import torch

import stowage


def test_safe_open_lists_and_reads_tensors_of_a_torch_file(fixtures):
    path = fixtures / "training_checkpoint.pt"
    expected = torch.load(path, weights_only=True)
    with stowage.safe_open(path) as f:
        assert f.format == "torch-zip"
        names = f.keys()
        assert "model.weight" in names and "model.weight" in f
        w = f.get_tensor("model.weight")
        assert torch.equal(w, expected["model"]["weight"])
        s = f.get_slice("model.weight")
        assert s.get_shape() == list(expected["model"]["weight"].shape)
        assert s.get_dtype() == "float32"
        assert torch.equal(s[0:2, ::2], expected["model"]["weight"][0:2, ::2])
        meta = f.metadata()
        assert meta["epoch"] == expected["epoch"]
        assert "weight" not in meta.get("model", {})
        with pytest.raises(KeyError):
            f.get_tensor("no.such.tensor")


def test_safe_open_on_safetensors_matches_safetensors(tmp_path):
    from safetensors import safe_open as st_open
    from safetensors.torch import save_file

    tensors = {"a": torch.arange(12, dtype=torch.float32).view(3, 4), "b.c": torch.ones(2, dtype=torch.bfloat16)}
    path = tmp_path / "m.safetensors"
    save_file(tensors, path, metadata={"format": "pt", "note": "x"})
    with stowage.safe_open(path) as f, st_open(path, framework="pt") as g:
        assert sorted(f.keys()) == sorted(g.keys())
        for k in g.keys():
            assert torch.equal(f.get_tensor(k), g.get_tensor(k))
        assert f.metadata() == g.metadata()
    with stowage.safe_open(path, framework="numpy") as f:
        assert isinstance(f.get_tensor("a"), np.ndarray)
        assert f.get_tensor("a")[2, 3] == 11.0


def test_safe_open_refuses_unsafe_globals_unless_inert(tmp_path):
    path = tmp_path / "module.pt"
    torch.save({"net": torch.nn.Linear(2, 3)}, path)
    with pytest.raises(stowage.UnsafeGlobalError):
        stowage.safe_open(path)
    with stowage.safe_open(path, inert=True) as f:
        names = f.keys()
        assert any(n.endswith("weight") for n in names), names
