"""stowage.safe_open: safetensors' lazy API over every format."""

import os

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
        assert s.get_dtype() == "F32"  # safetensors' name, as its get_dtype() gives it
        assert torch.equal(s[0:2, ::2], expected["model"]["weight"][0:2, ::2])
        meta = f.metadata()
        assert meta["epoch"] == expected["epoch"]
        assert "weight" not in meta.get("model", {})
        with pytest.raises(KeyError):
            f.get_tensor("no.such.tensor")


@pytest.mark.parametrize(
    "path, layout, fmt",
    [
        ("training_checkpoint.pt", "torch-zip", "torch-zip"),
        ("legacy_format.pt", "torch-legacy", "torch-legacy"),
        ("sharded/bin", "sharded-bin", "torch-zip"),
        ("sharded/bin/pytorch_model.bin.index.json", "sharded-bin", "torch-zip"),
        ("dcp/one", "dcp", "torch-zip"),
        ("dcp/hf", "dcp-hf", "safetensors"),
    ],
)
def test_safe_open_says_the_layout_it_opened(fixtures, path, layout, fmt):
    # What the library found when it resolved the path: the same names as
    # `stowage inspect --json`'s "format", found once, never probed again.
    with stowage.safe_open(fixtures / path) as f:
        assert (f.layout, f.format) == (layout, fmt)
    assert stowage.inspect(fixtures / path, hashes=False)["format"] == layout


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


INDICES = [
    (slice(0, 2),),
    (slice(1, 7, 3),),
    (3,),
    (-1,),
    (slice(None), slice(0, 5)),
    (slice(2, 6), slice(1, 9, 2)),
    (5, slice(None, None, 4)),
    (slice(4, 4),),
    (slice(None), 2),
    (Ellipsis, 1),  # not a range: read whole, then indexed
]


@pytest.mark.parametrize("kind", ["pt", "safetensors"])
def test_get_slice_gives_what_indexing_the_tensor_gives(tmp_path, kind):
    from safetensors.torch import save_file

    w = torch.arange(8 * 10, dtype=torch.float32).view(8, 10)
    view = w.t()  # not contiguous in its storage
    path = tmp_path / f"m.{kind}"
    if kind == "pt":
        torch.save({"w": w, "t": view, "b": torch.arange(6, dtype=torch.bfloat16)}, path)
    else:
        save_file({"w": w, "t": view.contiguous(), "b": torch.arange(6, dtype=torch.bfloat16)}, path)
    with stowage.safe_open(path) as f:
        for name, full in (("w", w), ("t", view)):
            s = f.get_slice(name)
            for index in INDICES:
                got, want = s[index], full[index]
                assert got.shape == want.shape and torch.equal(got, want), (name, index)
        assert torch.equal(f.get_slice("b")[1:4], torch.arange(6, dtype=torch.bfloat16)[1:4])
        with pytest.raises(IndexError):
            f.get_slice("w")[8]
    with stowage.safe_open(path, framework="numpy") as f:
        assert np.array_equal(f.get_slice("w")[2:4, ::3], w.numpy()[2:4, ::3])


def _read_bytes() -> int:
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux's /proc/self/io")
def test_get_slice_reads_only_the_bytes_it_covers(tmp_path):
    w = torch.randn(1024, 16384)  # 64 MiB
    torch.save({"w": w}, tmp_path / "big.pt")
    with stowage.safe_open(tmp_path / "big.pt") as f:
        before = _read_bytes()
        rows = f.get_slice("w")[100:104]
        read = _read_bytes() - before
    assert torch.equal(rows, w[100:104])
    # Four rows are 256 KiB; the tensor is 64 MiB.
    assert read < 4 << 20, read


def test_metadata_reads_no_tensor_bytes(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"w": torch.ones(4 << 20), "epoch": 3, "cfg": {"lr": 0.1}}, path)

    def rchar():
        with open("/proc/self/io") as f:
            return int(next(line for line in f if line.startswith("rchar:")).split()[1])

    with stowage.safe_open(path) as f:
        before = rchar()
        assert f.metadata() == {"epoch": 3, "cfg": {"lr": 0.1}}
        assert rchar() - before < 1 << 20


@pytest.mark.parametrize("fw", ["pt", "pytorch", "np"])
def test_safe_open_answers_as_safetensors_safe_open(tmp_path, fw):
    """Side by side with safetensors' own safe_open on the same files, with
    safetensors' argument and framework names: the same keys (sorted),
    offset_keys (file order), metadata, tensors (one by one and all at
    once), and slices' shapes, dtypes and parts, a slice's after the block
    too (issue 40, item 2)."""
    from safetensors import safe_open as st_open
    from safetensors.torch import save_file

    tensors = {
        "z.weight": torch.arange(24, dtype=torch.float32).view(2, 3, 4),
        "a.bias": torch.ones(5, dtype=torch.bfloat16),
        "m.idx": torch.arange(7, dtype=torch.int64),
        "b.half": torch.full((3, 2), 0.5, dtype=torch.float16),
        "flag": torch.tensor([True, False, True]),
    }
    for metadata in ({"format": "pt", "note": "x"}, None):
        path = tmp_path / f"m{len(metadata or {})}.safetensors"
        save_file(tensors, path, metadata=metadata)
        with stowage.safe_open(filename=path, framework=fw, device="cpu") as f, st_open(
            filename=path, framework=fw, device="cpu"
        ) as g:
            assert f.keys() == g.keys()
            assert f.offset_keys() == g.offset_keys()
            assert f.metadata() == g.metadata()
            for k in g.keys():
                mine, theirs = f.get_tensor(k), g.get_tensor(k)
                assert type(mine) is type(theirs)
                if fw == "np":
                    assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs), k
                else:
                    assert mine.dtype == theirs.dtype and torch.equal(mine, theirs), k
                a, b = f.get_slice(k), g.get_slice(k)
                assert a.get_shape() == b.get_shape(), k
                assert a.get_dtype() == b.get_dtype(), k
                for index in (slice(0, 1), slice(1, None), 0, -1):
                    x, y = a[index], b[index]
                    if fw == "np":
                        assert np.array_equal(x, y), (k, index)
                    else:
                        assert torch.equal(x, y), (k, index)
            x, y = f.get_slice("z.weight")[0:2, 1:, ::2], g.get_slice("z.weight")[0:2, 1:, ::2]
            assert (np.array_equal(x, y) if fw == "np" else torch.equal(x, y))
            mine, theirs = f.get_tensors(), g.get_tensors()
            assert list(mine) == list(theirs)
            for k in theirs:
                assert (np.array_equal if fw == "np" else torch.equal)(mine[k], theirs[k]), k
            late = f.get_slice("z.weight"), g.get_slice("z.weight")
        # A slice taken in the block reads after it, as safetensors' does.
        x, y = late[0][1:, 0], late[1][1:, 0]
        assert (np.array_equal(x, y) if fw == "np" else torch.equal(x, y))
        # Leaving the block closes both.
        with pytest.raises(Exception, match="(?i)closed"):
            g.keys()
        with pytest.raises(stowage.StowageError, match="closed"):
            f.keys()
        with pytest.raises(stowage.StowageError, match="closed"):
            f.get_tensor("flag")


def test_safe_open_takes_safetensors_arguments_on_any_format(fixtures):
    """framework="pt" and device="cpu" on a torch file; offset_keys in file
    order; any other device is a clear error; an unknown framework names the
    ones there are."""
    path = fixtures / "training_checkpoint.pt"
    expected = torch.load(path, weights_only=True)
    with stowage.safe_open(path, "pt", device="cpu") as f:
        assert f.keys() == sorted(f.keys())
        assert sorted(f.offset_keys()) == f.keys()
        assert torch.equal(f.get_tensor("model.weight"), expected["model"]["weight"])
    with stowage.safe_open(path, framework="np") as f:
        assert isinstance(f.get_tensor("model.weight"), np.ndarray)
    with pytest.raises(ValueError, match="device 'cuda:0'.*CPU memory only"):
        stowage.safe_open(path, "pt", device="cuda:0")
    with pytest.raises(ValueError, match="framework 'tf'.*pt, pytorch, np, flax"):
        stowage.safe_open(path, framework="tf")

