"""stowage.inspect, stowage.diff and stowage.convert: the command line's own
code run in process, so their results are exactly `stowage inspect --json`,
`stowage diff --json` and `stowage convert`'s."""

import json
import os
import pathlib
import subprocess

import pytest
import torch

import stowage

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _binary():
    for profile in ("debug", "release"):
        exe = ROOT / "target" / profile / "stowage"
        if exe.exists():
            return exe
    return None


def test_inspect_lists_what_torch_saved(tmp_path):
    base = torch.arange(12, dtype=torch.float32)
    state = {"w": base.view(3, 4), "row": base[4:8], "b": torch.ones(2, dtype=torch.bfloat16), "step": 7}
    torch.save(state, tmp_path / "m.pt")
    doc = stowage.inspect(tmp_path / "m.pt")
    assert doc["format"] == "torch-zip"
    tensors = {".".join(map(str, t["path"])): t for t in doc["tensors"]}
    assert tensors["w"]["shape"] == [3, 4] and tensors["w"]["dtype"] == "float32"
    assert tensors["row"]["storage_offset"] == 4
    # Views of one storage name one storage.
    assert tensors["w"]["storage_key"] == tensors["row"]["storage_key"]
    assert tensors["b"]["dtype"] == "bfloat16"
    assert all(len(t["sha256"]) == 64 for t in doc["tensors"])
    assert doc["values"] == [{"path": ["step"], "type": "int", "value": 7}]
    assert all(t["sha256"] is None for t in stowage.inspect(tmp_path / "m.pt", hashes=False)["tensors"])


@pytest.mark.skipif(_binary() is None, reason="the stowage binary is not built (cargo build -p stowage-cli)")
def test_inspect_and_diff_are_the_cli_json(fixtures):
    for name in ("state_dict.pt", "views.pt", "quantized.pt", "training_checkpoint.pt", "sharded/safetensors"):
        path = fixtures / name
        run = subprocess.run([str(_binary()), "inspect", "--json", os.fspath(path)], capture_output=True, text=True)
        assert json.loads(run.stdout) == stowage.inspect(path)
    a, b = fixtures / "state_dict.pt", fixtures / "state_dict_linear.pt"
    run = subprocess.run([str(_binary()), "diff", "--json", os.fspath(a), os.fspath(b)], capture_output=True, text=True)
    assert run.returncode == 1
    assert json.loads(run.stdout) == stowage.diff(a, b)


def test_diff_finds_a_changed_tensor_and_honours_tolerances(tmp_path):
    w = torch.linspace(0, 1, 8)
    torch.save({"w": w}, tmp_path / "a.pt")
    torch.save({"w": w + 1e-6}, tmp_path / "b.pt")
    assert stowage.diff(tmp_path / "a.pt", tmp_path / "a.pt")["same"] is True
    exact = stowage.diff(tmp_path / "a.pt", tmp_path / "b.pt")
    assert exact["same"] is False
    assert [(d["path"], d["kind"]) for d in exact["differences"]] == [(["w"], "values")]
    assert stowage.diff(tmp_path / "a.pt", tmp_path / "b.pt", atol=1e-5)["same"] is True


def test_convert_writes_what_torch_reads_back(tmp_path):
    base = torch.arange(6, dtype=torch.float32)
    torch.save({"w": base, "v": base[2:4]}, tmp_path / "m.pt")
    stowage.convert(tmp_path / "m.pt", tmp_path / "m.safetensors")
    from safetensors.torch import load_file

    loaded = load_file(tmp_path / "m.safetensors")
    assert torch.equal(loaded["w"], base) and torch.equal(loaded["v"], base[2:4])
    stowage.convert(tmp_path / "m.safetensors", tmp_path / "back.pt")
    back = torch.load(tmp_path / "back.pt", weights_only=True)
    assert torch.equal(back["w"], base)
    said = stowage.convert(tmp_path / "m.pt", tmp_path / "set", to="safetensors", max_shard_size="16B")
    assert said.startswith("wrote 2 shards"), said
    assert (tmp_path / "set" / "model.safetensors.index.json").exists()
    # The set holds separate copies of the two views: only sharing differs.
    kinds = {d["kind"] for d in stowage.diff(tmp_path / "set", tmp_path / "m.pt")["differences"]}
    assert kinds == {"sharing"}


def test_convert_selects_a_subtree_or_a_module_state_dict(tmp_path):
    sd = {"fc.weight": torch.arange(6.0).reshape(2, 3), "fc.bias": torch.ones(2)}
    torch.save({"model": sd, "optimizer": {"lr": 1e-3}, "epoch": 3}, tmp_path / "train.pt")
    stowage.convert(tmp_path / "train.pt", tmp_path / "w.safetensors", select="model")
    from safetensors.torch import load_file

    weights = load_file(tmp_path / "w.safetensors")
    assert sorted(weights) == ["fc.bias", "fc.weight"]
    assert all(torch.equal(weights[k], sd[k]) for k in sd)

    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    model[1].register_buffer("scratch", torch.zeros(2), persistent=False)
    torch.save(model, tmp_path / "whole.pt")
    stowage.convert(tmp_path / "whole.pt", tmp_path / "sd.pt", state_dict=True)
    got = torch.load(tmp_path / "sd.pt", weights_only=True)
    want = model.state_dict()
    assert list(got) == list(want)
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_failures_raise_the_library_exceptions(tmp_path):
    with pytest.raises(FileNotFoundError):
        stowage.inspect(tmp_path / "absent.pt")
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pt")
    with pytest.raises(stowage.UnsafeGlobalError) as e:
        stowage.inspect(tmp_path / "module.pt")
    assert e.value.module.startswith("torch.nn")
    doc = stowage.inspect(tmp_path / "module.pt", inert=True)
    assert doc["objects"][0]["module"].startswith("torch.nn")
    (tmp_path / "junk.pt").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(stowage.CorruptCheckpointError):
        stowage.inspect(tmp_path / "junk.pt")
    with pytest.raises(ValueError):
        stowage.convert(tmp_path / "module.pt", tmp_path / "x", to="nosuchformat")
    # A path that starts with '-' is a path, not an option.
    dash = tmp_path / "-dash.pt"
    torch.save({"w": torch.ones(1)}, dash)
    assert stowage.inspect(dash)["tensors"][0]["path"] == ["w"]


def test_what_convert_drops_is_a_python_warning(tmp_path):
    torch.save({"w": torch.ones(2), "model": torch.nn.Linear(2, 2)}, tmp_path / "mixed.pt")
    with pytest.warns(UserWarning, match=r"dropped 1 values"):
        stowage.convert(tmp_path / "mixed.pt", tmp_path / "w.pt", inert=True, drop_objects=True)
    back = torch.load(tmp_path / "w.pt", weights_only=True)
    assert list(back) == ["w"]
