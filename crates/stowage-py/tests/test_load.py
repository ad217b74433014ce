"""stowage.load against torch.load(weights_only=True), on the repository's
fixtures (written by real PyTorch) and on files saved here."""

import collections
import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import stowage
from _compare import assert_same, sharing


def torch_fixtures(fixtures):
    return sorted(p for p in fixtures.glob("*.pt"))


def fixture_ids(fixtures):
    return [p.name for p in torch_fixtures(fixtures)]


def torch_loads(path):
    try:
        return torch.load(path, weights_only=True), None
    except Exception as e:  # noqa: BLE001 - torch refuses: no reference answer
        return None, e


FIXTURES_DIR = __import__("conftest").FIXTURES
ALL = [p.name for p in sorted(FIXTURES_DIR.glob("*.pt"))]

# What the package does not build yet, each refused with a StowageError
# that says so (the Rust library reads them; their Python form is to come).
NOT_YET: dict = {}


def load_or_not_yet(name, **kw):
    path = FIXTURES_DIR / name
    if name in NOT_YET:
        with pytest.raises(stowage.StowageError, match=NOT_YET[name]):
            stowage.load(path, **kw)
        pytest.skip(f"not yet built in Python: {NOT_YET[name]}")
    return stowage.load(path, **kw)


@pytest.mark.parametrize("name", ALL)
def test_every_fixture_loads_as_torch_loads_it(name):
    path = FIXTURES_DIR / name
    expected, refused = torch_loads(path)
    if refused is not None:
        pytest.skip(f"torch.load(weights_only=True) refuses it: {refused!r:.80}")
    got = load_or_not_yet(name)
    groups = assert_same(got, expected)
    assert sharing(groups[1]) == sharing(groups[0]), "the sharing groups differ"


@pytest.mark.parametrize("name", ALL)
def test_mmap_loads_what_an_eager_load_does(name):
    path = FIXTURES_DIR / name
    expected, refused = torch_loads(path)
    if refused is not None:
        pytest.skip("torch refuses it")
    got = load_or_not_yet(name, mmap=True)
    groups = assert_same(got, expected)
    assert sharing(groups[1]) == sharing(groups[0])


ML_DTYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"]


def _numpy_of(t):
    """What numpy holds for a torch tensor: its bytes, with the same strides."""
    import ml_dtypes

    t = t.detach().resolve_conj().resolve_neg()
    name = str(t.dtype).removeprefix("torch.")
    if name in ML_DTYPES:
        raw = torch.int16 if t.element_size() == 2 else torch.uint8
        return t.view(raw).numpy().view(getattr(ml_dtypes, name))
    return t.numpy()


def _root(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _walk_numpy(a, b, path, out):
    if isinstance(b, torch.Tensor):
        assert isinstance(a, np.ndarray), f"{path}: {type(a).__name__}"
        want = _numpy_of(b)
        assert a.dtype == want.dtype, f"{path}: {a.dtype} vs {want.dtype}"
        assert a.shape == want.shape, path
        assert a.strides == want.strides, f"{path}: strides {a.strides} vs {want.strides}"
        assert a.tobytes() == want.tobytes(), f"{path}: values"
        if b.untyped_storage().nbytes() and b.numel() and not (b.is_conj() or b.is_neg()):
            out.setdefault(b.untyped_storage().data_ptr(), []).append(a)
    elif isinstance(b, dict):
        assert list(a) == list(b), path
        for k in b:
            _walk_numpy(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(b, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b)):
            _walk_numpy(x, y, f"{path}.{i}", out)


NUMPY_OK = {"bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
            "float16", "float32", "float64", "complex64", "complex128", *ML_DTYPES}


def _only_numpy_dtypes(obj):
    if isinstance(obj, torch.Tensor):
        return str(obj.dtype).removeprefix("torch.") in NUMPY_OK and not obj.is_meta and obj.layout == torch.strided
    if isinstance(obj, dict):
        return all(_only_numpy_dtypes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(_only_numpy_dtypes(v) for v in obj)
    return True


@pytest.mark.parametrize("name", ALL)
def test_numpy_arrays_are_the_tensors_and_share_as_they_do(name):
    path = FIXTURES_DIR / name
    expected, refused = torch_loads(path)
    if refused is not None:
        pytest.skip("torch refuses it")
    if name in NOT_YET or not _only_numpy_dtypes(expected):
        with pytest.raises(stowage.StowageError):
            stowage.load(path, framework="numpy")
        return
    got = stowage.load(path, framework="numpy")
    by_storage = {}
    _walk_numpy(got, expected, "root", by_storage)
    # Tensors on one storage are views of one buffer (they may view
    # disjoint parts of it; a lazily conjugated one is made, not viewed).
    for arrays in by_storage.values():
        for other in arrays[1:]:
            assert _root(other) is _root(arrays[0])


@pytest.mark.parametrize("mmap", [False, True])
def test_every_view_of_a_storage_is_on_one_torch_storage_however_its_first_tensor_is_made(tmp_path, mmap):
    # A storage's first tensor is made straight on its bytes (all of it in
    # one dimension, or any view, or a parameter); the later views must be
    # on that tensor's torch storage, not on another over the same bytes:
    # torch.save keys storages by their StorageImpl and would write two.
    flat = torch.arange(12, dtype=torch.float32)
    square = torch.arange(16, dtype=torch.float64).view(4, 4)
    param = torch.nn.Parameter(torch.arange(6, dtype=torch.bfloat16).view(2, 3))
    sd = {
        "flat": flat, "flat_view": flat[2:8].view(2, 3),
        "square": square, "square_t": square.t(),
        "param": param, "param_row": param.detach()[1],
        "scalar": torch.tensor(3.5), "grad": torch.ones(3, requires_grad=True),
        # First tensors that view their storage otherwise: transposed, and
        # at an offset.
        "alone_t": torch.arange(6, dtype=torch.int32).view(2, 3).t(),
        "alone_mid": torch.arange(10, dtype=torch.float32)[3:9].view(2, 3),
    }
    path = tmp_path / "firsts.pt"
    torch.save(sd, path)
    got = stowage.load(path, mmap=mmap)
    expected = torch.load(path, weights_only=True)
    assert_same(got, expected)
    # Each is a tensor of its own on its storage, as torch.load makes it:
    # not a view of another tensor.
    for name, t in got.items():
        assert (t.stride(), t.storage_offset()) == (expected[name].stride(), expected[name].storage_offset()), name
        assert t._base is None and not t._is_view(), name
    assert isinstance(got["param"], torch.nn.Parameter) and got["param"].requires_grad
    assert got["grad"].requires_grad and got["scalar"].shape == ()
    for a, b in (("flat", "flat_view"), ("square", "square_t"), ("param", "param_row")):
        assert got[a].untyped_storage()._cdata == got[b].untyped_storage()._cdata, (a, b)
    # And so torch.save of what was loaded keeps each pair on one storage.
    again = tmp_path / "again.pt"
    torch.save(got, again)
    back = torch.load(again, weights_only=True)
    for a, b in (("flat", "flat_view"), ("square", "square_t"), ("param", "param_row")):
        assert back[a].untyped_storage().data_ptr() == back[b].untyped_storage().data_ptr(), (a, b)
    back["flat"][3] = 100.0
    assert back["flat_view"][0, 1].item() == 100.0


def test_views_share_one_storage_and_writes_show_through(tmp_path):
    base = torch.arange(12, dtype=torch.float32)
    sd = {"base": base, "view": base[2:8].view(2, 3), "t": base.view(3, 4).t(), "other": torch.ones(2)}
    path = tmp_path / "views.pt"
    torch.save(sd, path)
    got = stowage.load(path)
    ptr = got["base"].untyped_storage().data_ptr()
    assert got["view"].untyped_storage().data_ptr() == ptr
    assert got["t"].untyped_storage().data_ptr() == ptr
    assert got["other"].untyped_storage().data_ptr() != ptr
    got["base"][3] = 100.0
    assert got["view"][0, 1].item() == 100.0
    assert got["t"][3, 0].item() == 100.0
    arrays = stowage.load(path, framework="numpy")
    assert np.shares_memory(arrays["base"], arrays["view"])
    assert not np.shares_memory(arrays["base"], arrays["other"])
    arrays["base"][3] = -1.0
    assert arrays["view"][0, 1] == -1.0


def test_parameters_and_requires_grad_are_kept(tmp_path):
    model = torch.nn.Linear(3, 2)
    sd = {"w": model.weight, "frozen": torch.nn.Parameter(torch.zeros(2), requires_grad=False),
          "g": torch.ones(2, requires_grad=True), "plain": torch.ones(2)}
    path = tmp_path / "params.pt"
    torch.save(sd, path)
    got = stowage.load(path)
    assert type(got["w"]) is torch.nn.Parameter and got["w"].requires_grad
    assert type(got["frozen"]) is torch.nn.Parameter and not got["frozen"].requires_grad
    assert type(got["g"]) is torch.Tensor and got["g"].requires_grad
    assert not got["plain"].requires_grad
    assert torch.equal(got["w"], model.weight)


def test_values_beside_tensors(tmp_path):
    obj = {"epoch": 3, "lr": 1e-3, "name": "run", "raw": b"\x00\x01", "none": None,
           "dtype": torch.bfloat16, "size": torch.Size([2, 3]), "device": torch.device("cpu"),
           "nested": [(1, 2), {"a": True}], "big": 2**80, "c": 1 + 2j}
    path = tmp_path / "values.pt"
    torch.save(obj, path)
    got = stowage.load(path)
    assert got == torch.load(path, weights_only=True)
    assert type(got["size"]) is torch.Size and type(got["dtype"]) is torch.dtype


def test_a_container_reached_twice_is_one_object(tmp_path):
    shared = [1, 2]
    path = tmp_path / "same.pt"
    torch.save({"a": shared, "b": shared}, path)
    got = stowage.load(path)
    assert got["a"] is got["b"]


def test_a_tensor_reached_twice_is_one_object_and_once_its_own(tmp_path):
    x, y, z = torch.arange(4.0), torch.ones(2), torch.zeros(3)
    path = tmp_path / "tensors.pt"
    # x in a dict, a list and a tuple; y in a tuple, then a dict; z once.
    torch.save({"a": x, "l": [x, y], "t": (y, x), "y": y, "z": z}, path)
    got = stowage.load(path)
    assert got["a"] is got["l"][0] is got["t"][1]
    assert got["l"][1] is got["t"][0] is got["y"]
    ids = {id(got[k]) for k in ("a", "y", "z")}
    assert len(ids) == 3 and torch.equal(got["z"], z)


def test_state_dict_metadata_is_kept(tmp_path):
    sd = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2)).state_dict()
    path = tmp_path / "sd.pt"
    torch.save(sd, path)
    got = stowage.load(path)
    assert isinstance(got, collections.OrderedDict)
    assert got._metadata == sd._metadata
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    model.load_state_dict(got)


def test_meta_map_location_gives_tensors_without_data(tmp_path):
    path = tmp_path / "m.pt"
    torch.save({"w": torch.ones(4, 5)}, path)
    got = stowage.load(path, map_location="meta")
    assert got["w"].is_meta and got["w"].shape == (4, 5)
    with pytest.raises(ValueError):
        stowage.load(path, map_location="cuda:0")


def test_safetensors_sharded_and_dcp_sources(fixtures, tmp_path):
    from safetensors.torch import save_file

    t = {"a": torch.arange(6.0).view(2, 3), "b": torch.ones(3, dtype=torch.int64)}
    save_file(t, tmp_path / "m.safetensors")
    got = stowage.load(tmp_path / "m.safetensors")
    assert set(got) == {"a", "b"} and torch.equal(got["a"], t["a"])
    sharded = fixtures / "sharded"
    for index in sorted(sharded.rglob("*.index.json"))[:2]:
        assert len(stowage.load(index)) > 0
    dcp = stowage.load(fixtures / "dcp" / "one")
    assert isinstance(dcp, dict) and dcp


def test_unsafe_globals_are_refused_with_their_name(tmp_path):
    path = tmp_path / "module.pt"
    torch.save(torch.nn.Linear(2, 2), path)
    with pytest.raises(stowage.UnsafeGlobalError) as info:
        stowage.load(path)
    assert info.value.module.startswith("torch.nn")
    assert isinstance(info.value, stowage.StowageError)
    assert info.value.file is not None and "module.pt" in info.value.file
    inert = stowage.load(path, inert=True)
    assert isinstance(inert, stowage.InertObject)
    assert inert.name == "Linear"
    params = inert.state["_parameters"]
    assert torch.equal(params["weight"], torch.load(path, weights_only=False).weight)


def test_allowed_globals_are_decoded_as_data(tmp_path):
    import argparse

    path = tmp_path / "ns.pt"
    torch.save({"args": argparse.Namespace(lr=0.1, depth=3)}, path)
    with pytest.raises(stowage.UnsafeGlobalError):
        stowage.load(path)
    got = stowage.load(path, allow_globals=["argparse.Namespace"])
    assert got["args"] is not None


def test_missing_files_and_corrupt_files_raise_python_errors(fixtures, tmp_path):
    with pytest.raises(FileNotFoundError):
        stowage.load(tmp_path / "absent.pt")
    with pytest.raises(stowage.CorruptCheckpointError) as info:
        stowage.load(fixtures / "hostile" / "truncated.pt")
    assert info.value.file.endswith("truncated.pt")
    with pytest.raises(stowage.CorruptCheckpointError) as info:
        stowage.load(fixtures / "hostile" / "short_record.pt")
    assert info.value.entry == "data/0", info.value.entry  # the short record itself
    with pytest.raises(stowage.StowageError):
        stowage.load(fixtures / "hostile" / "not_a_checkpoint.pt")


HOSTILE = sorted(p.name for p in (FIXTURES_DIR / "hostile").glob("*.pt"))
# Hostile in shape, harmless to a loader that keeps sharing (the Rust
# tests' ACCEPTED, fixtures/hostile/README.md): 2**60 leaves if expanded.
ACCEPTED = {"memo_doubling.pt"}
# Well-formed files that name a global to call; every other one is damaged.
UNSAFE = {"builtins_eval.pt", "custom_class.pt", "os_system.pt"}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_files_raise_and_never_crash(name):
    code = (
        "import sys, stowage\n"
        "try:\n"
        f"    stowage.load({str(FIXTURES_DIR / 'hostile' / name)!r}, inert=False)\n"
        "except stowage.StowageError as e:\n"
        "    print(type(e).__name__); sys.exit(0)\n"
        "print('loaded'); sys.exit(0 if sys.argv[1] == 'accepted' else 3)\n"
    )
    verdict = "accepted" if name in ACCEPTED else "refused"
    run = subprocess.run([sys.executable, "-c", code, verdict], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"{name}: exit {run.returncode}\n{run.stdout}\n{run.stderr[-2000:]}"
    assert (run.stdout.strip() == "loaded") == (name in ACCEPTED), run.stdout
    if name in UNSAFE:
        assert run.stdout.strip() == "UnsafeGlobalError", run.stdout
    elif name not in ACCEPTED:
        assert run.stdout.strip() == "CorruptCheckpointError", run.stdout


def test_numpy_path_never_imports_torch(tmp_path):
    path = tmp_path / "np.pt"
    torch.save({"w": torch.arange(4, dtype=torch.bfloat16), "i": torch.arange(3)}, path)
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # any import of torch fails\n"
        "import stowage, numpy as np, ml_dtypes\n"
        f"d = stowage.load({str(path)!r}, framework='numpy')\n"
        "assert d['w'].dtype == ml_dtypes.bfloat16, d['w'].dtype\n"
        "assert d['i'].tolist() == [0, 1, 2]\n"
        "print('ok')\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-2000:]


def test_eight_threads_load_at_once(fixtures):
    path = fixtures / "training_checkpoint.pt"
    expected = torch.load(path, weights_only=True)
    errors = []

    def work():
        try:
            for _ in range(5):
                assert_same(stowage.load(path), expected)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_paths_may_be_pathlike_or_str(fixtures):
    path = fixtures / "simple.pt"
    a = stowage.load(path)
    b = stowage.load(os.fspath(path))
    assert_same(a, b)


KINDS = ["sparse_coo", "sparse_compressed", "sparse_edge_cases", "sparse_legacy_format",
         "nested", "quantized_per_channel", "quantized_packed", "meta"]


@pytest.mark.parametrize("name", KINDS)
def test_sparse_nested_and_quantized_tensors_load_as_torch_loads_them(name):
    path = FIXTURES_DIR / "kinds" / f"{name}.pt"
    expected, refused = torch_loads(path)
    if refused is not None:
        pytest.skip(f"torch.load(weights_only=True) refuses it: {refused!r:.80}")
    assert_same(stowage.load(path), expected)
    if name != "meta":
        with pytest.raises(stowage.StowageError, match="no numpy form"):
            stowage.load(path, framework="numpy")


def test_load_and_save_take_file_objects_as_torch_does(tmp_path):
    """load reads a file object (BytesIO, an open file) from its position,
    save writes one, and torch reads what stowage wrote there (issue 40,
    item 3)."""
    import io

    sd = {"w": torch.arange(6.0).view(2, 3), "tied": None, "step": 3}
    sd["tied"] = sd["w"][1]
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    got = stowage.load(buf)
    assert torch.equal(got["w"], sd["w"]) and got["step"] == 3
    assert got["tied"].untyped_storage().data_ptr() == got["w"].untyped_storage().data_ptr()
    # From the file object's position, as torch.load reads it.
    prefixed = io.BytesIO(b"junk" + buf.getvalue())
    prefixed.seek(4)
    assert torch.equal(stowage.load(prefixed)["w"], sd["w"])
    path = tmp_path / "x.pt"
    torch.save(sd, path)
    with open(path, "rb") as f:
        assert torch.equal(stowage.load(f, "cpu")["w"], sd["w"])
    out = io.BytesIO()
    stowage.save(sd, out)
    out.seek(0)
    back = torch.load(out, weights_only=True)
    assert torch.equal(back["w"], sd["w"]) and back["step"] == 3
    assert back["tied"].untyped_storage().data_ptr() == back["w"].untyped_storage().data_ptr()
    with pytest.raises(ValueError, match="file object"):
        stowage.load(io.BytesIO(out.getvalue()), lazy=True)
    with pytest.raises(TypeError, match="binary mode"):
        stowage.load(io.StringIO("text"))


def test_load_takes_torch_loads_arguments(tmp_path):
    """map_location as a string, a torch.device, a dict of locations or a
    function; weights_only=True (False is refused, pointing to inert=True)
    (issue 40, item 3)."""
    path = tmp_path / "x.pt"
    torch.save({"w": torch.ones(3)}, path)
    for location in ("cpu", torch.device("cpu"), {"cuda:0": "cpu"}, {"cuda:0": torch.device("cpu")}, {}):
        assert torch.equal(stowage.load(path, map_location=location, weights_only=True)["w"], torch.ones(3))
    assert stowage.load(path, torch.device("meta"))["w"].is_meta
    with pytest.raises(ValueError, match="weights_only=False.*inert=True"):
        stowage.load(path, weights_only=False)
    with pytest.raises(ValueError, match="no accelerator back end"):
        stowage.load(path, map_location=torch.device("cuda", 0))
    with pytest.raises(ValueError, match="several devices"):
        stowage.load(path, map_location={"cuda:0": "cpu", "cuda:1": "meta"})
    with pytest.raises(ValueError, match="function"):
        stowage.load(path, map_location=lambda storage, loc: storage, lazy=True)


def test_map_location_as_a_function_is_called_as_torch_load_calls_it(tmp_path):
    """Each storage, read into CPU memory, with the location the file gives
    it; what the function returns is what the tensors are built on, and
    None restores the storage where it was saved (issue 40, item 3)."""
    x = torch.arange(6.0)
    path = tmp_path / "x.pt"
    # A meta tensor has no storage in the file: torch never hands it over.
    meta = torch.empty(2, 3, device="meta")
    torch.save({"a": x, "b": x[2:], "c": torch.ones(2, dtype=torch.int64), "m": meta}, path)

    def recorder(calls, result):
        def place(storage, location):
            calls.append((location, storage.nbytes(), storage.device.type))
            return result(storage)

        return place

    for result in (lambda s: s, lambda s: None, lambda s: s.clone()):
        theirs, ours = [], []
        want = torch.load(path, map_location=recorder(theirs, result), weights_only=True)
        got = stowage.load(path, map_location=recorder(ours, result))
        assert sorted(ours) == sorted(theirs) and len(ours) == 2
        for k in "abc":
            assert torch.equal(got[k], want[k]), k
        assert got["m"].is_meta and want["m"].is_meta and got["m"].shape == meta.shape
        # Views of one storage stay views of the one placed storage.
        assert got["b"].untyped_storage().data_ptr() == got["a"].untyped_storage().data_ptr()
    # The storage returned is the one the tensors use.
    moved = stowage.load(path, map_location=lambda s, loc: torch.UntypedStorage(s.nbytes(), device="meta"))
    assert moved["a"].is_meta and moved["c"].is_meta


def test_a_missing_part_is_corrupt_and_named_with_its_index(tmp_path):
    """A shard the index names, or a rank file `.metadata` names, that is
    not there raises CorruptCheckpointError naming both; a missing source
    stays FileNotFoundError (issue 40, item 9)."""
    sd = {f"l{i}.w": torch.full((64,), float(i)) for i in range(8)}
    stowage.save(sd, tmp_path / "set", to="safetensors", max_shard_size="600B")
    shard = tmp_path / "set" / "model-00002-of-00004.safetensors"
    shard.unlink()
    for src in (tmp_path / "set", tmp_path / "set" / "model.safetensors.index.json"):
        for lazy in (False, True):
            with pytest.raises(stowage.CorruptCheckpointError) as info:
                stowage.load(src, lazy=lazy)
            message = str(info.value)
            assert str(shard) in message and "model.safetensors.index.json names" in message, message
    stowage.save(sd, tmp_path / "dcp", to="dcp")
    (tmp_path / "dcp" / "__0_0.distcp").unlink()
    with pytest.raises(stowage.CorruptCheckpointError, match=r"__0_0\.distcp, which .*\.metadata names"):
        stowage.load(tmp_path / "dcp")
    with pytest.raises(FileNotFoundError):
        stowage.load(tmp_path / "absent")


def test_a_tensor_pickled_once_is_one_object_as_torch_load_gives_it(tmp_path):
    """What `torch.save` memoised (a tensor, a Parameter, reached at several
    places) is one Python object after a load, in every mode, as after
    `torch.load`; tensors that only share a storage stay distinct objects.
    A save or a conversion of what was loaded keeps it for `torch.load`."""
    x = torch.arange(4.0)
    p = torch.nn.Parameter(torch.ones(2))
    saved = {"a": x, "b": x, "c": [x, x[1:]], "d": x[1:], "p": p, "q": {"again": p}}
    path = tmp_path / "shared.pt"
    torch.save(saved, path)

    def identities(sd):
        return (
            sd["a"] is sd["b"],
            sd["c"][0] is sd["a"],
            sd["c"][1] is sd["d"],
            sd["p"] is sd["q"]["again"],
            sd["a"] is sd["d"],
        )

    want = identities(torch.load(path, weights_only=True))
    assert want == (True, True, False, True, False)
    for kwargs in ({}, {"mmap": True}, {"lazy": True}):
        assert identities(stowage.load(path, **kwargs)) == want, kwargs
    stowage.save(stowage.load(path), tmp_path / "again.pt")
    assert identities(torch.load(tmp_path / "again.pt", weights_only=True)) == want
    stowage.convert(path, tmp_path / "converted.pt")
    assert identities(torch.load(tmp_path / "converted.pt", weights_only=True)) == want


def test_huge_pages_load_the_same_tensors(tmp_path):
    sd = {"big": torch.randn(3 << 19), "small": torch.arange(10)}  # 6 MiB and 80 bytes
    sd["view"] = sd["big"][5:]
    path = tmp_path / "h.pt"
    torch.save(sd, path)
    got = stowage.load(path, huge_pages=True)
    assert torch.equal(got["big"], sd["big"]) and torch.equal(got["small"], sd["small"])
    assert got["view"].untyped_storage().data_ptr() == got["big"].untyped_storage().data_ptr()


# The dtypes whose storages' first tensors are made from DLPack capsules,
# and the others, made from buffers: apart, so that no tensor of the other
# way keeps a block of small storages alive for the first.
DLPACK_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64,
                 torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex128,
                 torch.complex64]
BUFFER_DTYPES = [torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2]


@pytest.mark.parametrize("dtypes,dlpack", [(DLPACK_DTYPES, True), (BUFFER_DTYPES, True), (DLPACK_DTYPES, False)],
                         ids=["dlpack", "buffer", "dlpack-dtypes-from-buffers"])
def test_every_dtype_keeps_its_bytes_after_the_load_is_gone(tmp_path, monkeypatch, dtypes, dlpack):
    # Either way the tensor holds its storage's bytes itself: once the load
    # is gone and other loads of the same sizes have taken memory, it still
    # reads its own values, as torch.load gives them, and takes writes.
    # (Without `dlpack_view`, as before torch 2.4, every dtype is a buffer.)
    if not dlpack:
        monkeypatch.setattr(stowage._torch.Adapter, "dlpack_view", None)
    def state(fill):
        # A file of 1 MiB or more: its tensors are made while it is read.
        sd = {"pad": torch.full((1 << 18,), float(fill))}
        for d in dtypes:
            values = torch.arange(1, 7) * fill
            values = values % 4 > 1 if d is torch.bool else values
            sd[str(d)] = values.to(d)
            sd[f"{d} view"] = sd[str(d)][2:].view(2, 2)
        return sd
    torch.save(state(1), tmp_path / "a.pt")
    torch.save(state(3), tmp_path / "b.pt")
    expected = torch.load(tmp_path / "a.pt", weights_only=True)
    kept = stowage.load(tmp_path / "a.pt")
    got = {name: (t, t.untyped_storage()._cdata) for name, t in kept.items()}
    del kept
    gc.collect()
    others = [stowage.load(tmp_path / "b.pt") for _ in range(3)]
    for name, (t, storage) in got.items():
        want = expected[name]
        assert (t.dtype, t.shape, t.stride(), t.storage_offset()) == (
            want.dtype, want.shape, want.stride(), want.storage_offset()), name
        assert torch.equal(t.view(torch.uint8), want.view(torch.uint8)), name
        assert not torch.equal(others[0][name].view(torch.uint8), want.view(torch.uint8)), name
    for d in dtypes:
        t, view = got[str(d)][0], got[f"{d} view"][0]
        assert got[str(d)][1] == got[f"{d} view"][1], d  # one torch storage
        t.view(torch.uint8)[-1] = 0
        assert view.view(torch.uint8).flatten()[-1].item() == 0, d


def test_a_file_of_many_tensors_loads_as_torch_loads_it(tmp_path):
    # A file of 1 MiB or more has its storages' tensors made while it is
    # read, then taken by the tensors that view them: every way a first
    # tensor can view its storage, parameters and grads, storages shared
    # across entries and reached first through a view.
    sd = {"pad": torch.randn(1 << 18)}
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.uint8,
              torch.complex64, torch.uint16, torch.float8_e4m3fn]
    for i in range(600):
        d = dtypes[i % len(dtypes)]
        base = (torch.arange(24) * (i + 1)).to(d)
        kind = i % 6
        if kind == 0:
            sd[f"t{i}"] = base
        elif kind == 1:
            sd[f"t{i}.view"] = base[4:16].view(3, 4)
            sd[f"t{i}"] = base
        elif kind == 2:
            sd[f"t{i}"] = base.view(4, 6).t()
        elif kind == 3 and d.is_floating_point:
            sd[f"t{i}"] = torch.nn.Parameter(base.view(2, 12))
        elif kind == 4 and d.is_floating_point:
            sd[f"t{i}"] = base.clone().requires_grad_(True)
        else:
            sd[f"t{i}"] = base[1:]
            sd[f"t{i}.again"] = sd[f"t{i}"]
    path = tmp_path / "many.pt"
    torch.save(sd, path)
    assert path.stat().st_size >= 1 << 20
    expected = torch.load(path, weights_only=True)
    for kwargs in ({}, {"mmap": True}):
        got = stowage.load(path, **kwargs)
        groups = assert_same(got, expected)
        assert sharing(groups[1]) == sharing(groups[0]), kwargs
        for name, t in got.items():
            want = expected[name]
            assert (t.stride(), t.storage_offset(), t.requires_grad, type(t)) == (
                want.stride(), want.storage_offset(), want.requires_grad, type(want)), (name, kwargs)
            assert t._base is None, (name, kwargs)
        assert got["t5.again"] is got["t5"]
        got["t1"][5] = 0
        assert got["t1.view"][0, 1].item() == 0


def test_mmap_none_is_torchs_default(tmp_path):
    """`mmap=None` is `torch.load`'s own default: wrappers that pass their
    arguments on give it."""
    path = tmp_path / "sd.pt"
    torch.save({"w": torch.arange(4.0)}, path)
    assert torch.equal(stowage.load(path, mmap=None)["w"], torch.arange(4.0))


# Run apart: a regression is a crash of the interpreter, which must fail
# this test, not end the session.
_DEEP = r'''
import sys, threading, torch, stowage
deep = x = {}
for _ in range(300):
    x["k"] = {}
    x = x["k"]
sys.setrecursionlimit(10000)  # for torch.save's pickler only
torch.save(deep, sys.argv[1])
assert stowage.load(sys.argv[1]) == torch.load(sys.argv[1], weights_only=True)
said = []
def small_thread():
    for call in (lambda: stowage.load(sys.argv[1]), lambda: stowage.save(deep, sys.argv[1] + ".out.pt"),
                 lambda: stowage.manifest(deep)):
        try:
            call()
            said.append("done")
        except RecursionError as e:
            said.append(str(e))
threading.stack_size(512 << 10)
t = threading.Thread(target=small_thread)
t.start()
t.join()
print("\n".join(said))
'''


def test_a_checkpoint_nested_past_a_threads_stack_is_a_recursion_error(tmp_path):
    """A dict nested 300 deep (torch.load reads it) loads whole on the main
    thread (8 MiB; CI's debug build takes about 13 KiB a level, a release
    build under 2); on a thread with a 512 KiB stack, loading, saving and
    hashing it go as deep as that stack holds and raise RecursionError
    naming the place, never crash the interpreter."""
    done = subprocess.run([sys.executable, "-c", _DEEP, str(tmp_path / "deep.pt")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout.splitlines()
    assert len(said) == 3, said
    for line in said:
        assert line.startswith("containers nested "), line
        assert "deeper than this thread's stack holds" in line and " at k.k.k." in line, line


def test_a_tensors_attributes_are_set_back_as_torch_sets_them():
    """A tensor and a parameter given Python attributes before torch.save
    (`_rebuild_from_type_v2`, `_rebuild_parameter_with_state`) load with
    them, eagerly and lazily; an array has no place for them."""
    path = FIXTURES_DIR / "kinds" / "tensor_state.pt"
    expected = torch.load(path, weights_only=True)
    for got in (stowage.load(path), stowage.load(path, lazy=True)):
        for name in ("with_attrs", "param_with_attrs"):
            assert type(got[name]) is type(expected[name]), name
            assert vars(got[name]) == vars(expected[name]) != {}, name
            assert torch.equal(got[name], expected[name]), name
    with pytest.raises(stowage.StowageError, match="Python attributes have no place on an array"):
        stowage.load(path, framework="numpy")


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_legacy_file_of_either_protocol_torch_reads_loads(tmp_path, protocol):
    """`_use_new_zipfile_serialization=False` with `pickle_protocol=3` (not
    only the default 2) loads as torch loads it, views included (before:
    "not a checkpoint")."""
    base = torch.arange(6.0).reshape(2, 3)
    sd = {"w": base, "column": base[:, 1], "name": "w", "n": 3}
    path = tmp_path / f"legacy{protocol}.pt"
    torch.save(sd, path, _use_new_zipfile_serialization=False, pickle_protocol=protocol)
    expected = torch.load(path, weights_only=True)
    got = stowage.load(path)
    groups = assert_same(got, expected)
    assert sharing(groups[1]) == sharing(groups[0])


def _with_pickle(path, data_pkl):
    """A torch zip as torch.save writes one of `torch.ones(1)`, its
    `data.pkl` replaced by a hand-made pickle over that one storage."""
    import io
    import zipfile

    buf = io.BytesIO()
    torch.save(torch.ones(1), buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for n in zin.namelist():
            z.writestr(n, bytes(data_pkl) if n.endswith("data.pkl") else zin.read(n))


# `_rebuild_from_type_v2(_rebuild_tensor_v2, Tensor, (storage 0, …), STATE)`
# with STATE's pickle put between the two parts.
_REBUILD = (b"ctorch._tensor\n_rebuild_from_type_v2\n(ctorch._utils\n_rebuild_tensor_v2\nctorch\nTensor\n"
            b"((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x01tQ"
            b"K\x00K\x01\x85K\x01\x85\x89ccollections\nOrderedDict\n)Rt")


def _chain(links, in_dict):
    """A tensor whose Python state is the next tensor (or a dict holding
    it), `links` long, each link built before the one that holds it (the
    pickle's nesting stays 3 deep): only a hand-made file holds one."""
    import struct

    put, get = (lambda i: b"r" + struct.pack("<I", i)), (lambda i: b"j" + struct.pack("<I", i))
    pickle = bytearray(b"\x80\x02")
    last = None
    for i in range(links):
        state = b"N" if last is None else (b"}X\x01\x00\x00\x00x" + get(last) + b"s" if in_dict else get(last))
        pickle += _REBUILD + state + b"tR" + put(i)
        last = i
    return pickle + b"."


_CHAINS = r'''
import sys, stowage
for name in sys.argv[1:]:
    try:
        stowage.load(name)
        print("loaded")
    except Exception as e:
        print(type(e).__name__, str(e)[-160:].replace("\n", " "))
'''


def test_tensors_chained_through_their_states_are_refused_not_a_crash(tmp_path):
    """A hand-made file whose tensor's state is a tensor, 2,000 links deep
    (torch.load raises on it), crashed the interpreter once attributes
    loaded: a state must be a dict (or a pair, as torch.save writes it).
    Chained through dicts, the links are levels of the walk, bounded."""
    bare, wrapped = tmp_path / "bare.pt", tmp_path / "wrapped.pt"
    _with_pickle(bare, _chain(2000, in_dict=False))
    _with_pickle(wrapped, _chain(3000, in_dict=True))
    done = subprocess.run([sys.executable, "-c", _CHAINS, str(bare), str(wrapped)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout.splitlines()
    assert said[0].startswith("CorruptCheckpointError") and "a tensor's Python state" in said[0], said[0]
    assert said[1].startswith("RecursionError"), said[1]


def test_a_tensor_attribute_its_class_defines_is_refused(tmp_path):
    """torch.save writes a tensor's __dict__ only; a hand-made state naming
    `_backward_hooks` (which torch.load sets, arming a crash in a later
    backward pass) is refused."""
    path = tmp_path / "hooks.pt"
    _with_pickle(path, b"\x80\x02" + _REBUILD + b"}X\x0f\x00\x00\x00_backward_hooksK\x01stR.")
    with pytest.raises(stowage.StowageError, match="a tensor attribute named '_backward_hooks'"):
        stowage.load(path)


def test_attributes_do_not_stop_the_readers_that_leave_them_out(tmp_path):
    """safe_open's metadata() and stowage.dcp's reader build no tensors:
    a tensor's attributes are no reason to refuse the file."""
    t = torch.ones(2)
    t.note = "x"
    path = tmp_path / "attr.pt"
    torch.save({"t": t, "epoch": 3}, path)
    assert stowage.safe_open(path).metadata() == {"epoch": 3}
    from stowage.dcp import StorageReader

    assert "t" in StorageReader(path).read_metadata().state_dict_metadata
