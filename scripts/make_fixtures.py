#!/usr/bin/env python3
"""Regenerate the PyTorch-written test fixtures in crates/stowage/tests/fixtures/.

usage: make_fixtures.py [--out DIR] [NAME ...]     (default: every fixture below)
Run it with the python that scripts/torch-venv.sh prints (it needs real torch).

Each NAME.pt is written by torch.save (or, for the few synthetic layouts, by
rewriting a file that torch.save wrote), then checked:
  * torch.load(weights_only=True) must accept it, or must refuse it where the
    fixture is listed in NEEDS_WEIGHTS_ONLY_FALSE (so the README stays true);
  * fixture-specific assertions (values survive a byte swap, a layout rewrite...);
  * the file stays under MAX_BYTES.
NAME.pt.json is then torch_manifest.manifest(NAME.pt): what real PyTorch sees,
in the `inspect --json` tensor form that scripts/check-inspect compares against.

Everything is deterministic: fixed seeds, fixed storage keys, no pointer values,
so rerunning gives the same bytes (for a given PyTorch version).

The fixtures shared from ../shared/fixtures (simple, views, dtypes, new_dtypes,
state_dict, legacy_format, params, empty_and_scalar) are not made here.
"""
import argparse
import collections
import io
import json
import os
import pickle
import pickletools
import struct
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from ckpt_zip import build_zip, read_records  # noqa: E402
from torch_manifest import manifest, values_manifest, walk  # noqa: E402

DEFAULT_OUT = os.path.join(HERE, "..", "crates", "stowage", "tests", "fixtures")
MAX_BYTES = 20 * 1024

# Fixtures that torch.load(weights_only=True) refuses in the PyTorch this was made with.
NEEDS_WEIGHTS_ONLY_FALSE = {
    "protocol4": "the weights-only unpickler has no FRAME opcode: 'Unsupported operand 149'",
    "protocol5": "the weights-only unpickler has no FRAME opcode: 'Unsupported operand 149'",
}

FIXTURES = {}


def fixture(fn):
    """Register a fixture maker: fn(path) writes the checkpoint at path."""
    FIXTURES[fn.__name__.removeprefix("make_")] = fn
    return fn


# --------------------------------------------------------------------------- helpers

def seeded(seed):
    """A torch.Generator with a fixed seed, so each fixture is independent of the others."""
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=seeded(seed)).to(dtype)


def archive_name(path):
    """The top folder name torch.save gives a file at path (basename without extension)."""
    return os.path.splitext(os.path.basename(path))[0]


class _Anything:
    """Stands in for every global while reading a pickle's persistent ids."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


def storage_types(data_pkl):
    """{storage_key: storage class name} for every persistent id in a torch pickle,
    read without building any tensor (plain pickle with every global stubbed)."""
    found = {}

    class Reader(pickle.Unpickler):
        def find_class(self, module, name):
            if name.endswith("Storage"):
                return name
            if (module, name) == ("collections", "OrderedDict"):
                return collections.OrderedDict
            return _Anything

        def persistent_load(self, pid):
            # zip format: ('storage', cls, key, location, numel); legacy adds view_metadata
            found.setdefault(pid[2], pid[1])
            return None

    Reader(io.BytesIO(data_pkl)).load()
    return found


def element_swap_size(storage_class):
    """Byte-swap unit for a legacy storage class: the element size, halved for complex."""
    dtype = torch.storage._get_dtype_from_pickle_storage_type(storage_class)
    size = torch.empty(0, dtype=dtype).element_size()
    return size // 2 if dtype.is_complex else size


def byteswap(data, unit):
    if unit == 1:
        return data
    return np.frombuffer(data, dtype=f"<u{unit}").byteswap().tobytes()


def rekey_pickle(data, mapping):
    """The pickle `data` with every BINUNICODE string found in `mapping` replaced.

    Protocol-2 pickles hold no offsets, so ops can be copied one by one."""
    out = bytearray()
    ops = list(pickletools.genops(data))
    for i, (op, arg, pos) in enumerate(ops):
        end = ops[i + 1][2] if i + 1 < len(ops) else pos + 1
        if op.name == "BINUNICODE" and arg in mapping:
            new = mapping[arg].encode()
            out += b"X" + struct.pack("<I", len(new)) + new
        else:
            out += data[pos:end]
    return bytes(out)


def split_legacy(blob):
    """A legacy (non-zip) torch file as ([5 pickles], {key: (numel, bytes)}, keys in file order)."""
    f = io.BytesIO(blob)
    pickles = []
    for _ in range(5):
        start = f.tell()
        for op, _, _ in pickletools.genops(f):
            if op.name == "STOP":
                break
        pickles.append(blob[start:f.tell()])
    keys = pickle.loads(pickles[4])
    types = storage_types(pickles[3])
    blobs = {}
    for key in keys:
        (numel,) = struct.unpack("<q", f.read(8))
        dtype = torch.storage._get_dtype_from_pickle_storage_type(types[key])
        nbytes = numel * torch.empty(0, dtype=dtype).element_size()
        blobs[key] = (numel, f.read(nbytes))
    assert f.read() == b"", "trailing bytes after the legacy blobs"
    return pickles, blobs, keys


def legacy_save_stable(obj, path):
    """torch.save(obj, _use_new_zipfile_serialization=False), with the pointer-valued
    storage keys renamed to fixed pointer-like numbers (same order), so the file is
    the same on every run."""
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=False)
    pickles, blobs, keys = split_legacy(buf.getvalue())
    # number the keys by first use in the main pickle: pointer values (and so their
    # sorted order) change from run to run, the traversal order does not
    first_use = list(storage_types(pickles[3]))
    mapping = {k: str(140000000000000 + 4096 * i) for i, k in enumerate(first_use)}
    main = rekey_pickle(pickles[3], mapping)
    new_keys = sorted(mapping[k] for k in keys)
    inverse = {v: k for k, v in mapping.items()}
    out = bytearray(b"".join(pickles[:3]) + main + pickle.dumps(new_keys, protocol=2))
    for key in new_keys:
        numel, data = blobs[inverse[key]]
        out += struct.pack("<q", numel) + data
    with open(path, "wb") as f:
        f.write(out)


def same_tensors(a, b):
    """True when two loaded objects hold bit-identical tensors at the same paths."""
    ma, mb = [], []
    walk(a, [], ma, {})
    walk(b, [], mb, {})
    strip = lambda m: [{k: v for k, v in e.items() if k != "storage_group"} for e in m]  # noqa: E731
    return strip(ma) == strip(mb)


# --------------------------------------------------------------------------- fixtures

@fixture
def make_nested(path):
    """Nested containers around tensors: str/int/negative-int keys, list, tuple,
    ints of every pickle width (all within i64), floats, strings, None, bools, empty containers,
    torch.Size, a dtype, a device; one tensor object reachable by two paths
    (pickle memo); two different tensors viewing one storage."""
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    base = torch.arange(10, dtype=torch.int16)
    obj = {
        "name": "nested",
        "unicode": "gr\u00fc\u00dfe \u2713",
        7: "int key",
        -1: "negative int key",
        "ints": [0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31, 2**63 - 1, -2**63],  # K M J LONG1
        "floats": [0.5, -0.0, 1e300, float("inf"), float("-inf")],
        "flags": [True, False, None],
        "empty": [[], {}, ()],
        "one": (1,),
        "outer": [1, ("inner", t, 2.5)],          # dict -> list -> tuple -> tensor
        "again": {"same_tensor": t},               # the same tensor object, a second path
        "int_keys": {0: "zero", 1: "one", 10: "ten"},
        "size": torch.Size([2, 3]),
        "dtype": torch.float16,
        "device": torch.device("cpu"),
        "shared": {"first": base[:4], "second": base[4:].view(2, 3)},
    }
    torch.save(obj, path)
    back = torch.load(path, weights_only=True)
    assert back["outer"][1][1] is back["again"]["same_tensor"]
    assert back["shared"]["first"].untyped_storage().data_ptr() == back["shared"]["second"].untyped_storage().data_ptr()


@fixture
def make_root_tensor(path):
    """A bare tensor as the root object: a transposed, non-contiguous view
    (shape [5, 4], stride [1, 8], offset 10) of a bigger 5x8 storage."""
    big = torch.arange(40, dtype=torch.float32).reshape(5, 8)
    t = big[1:, 2:7].t()
    assert (t.stride(), t.storage_offset()) == ((1, 8), 10)
    torch.save(t, path)


@fixture
def make_root_list(path):
    """A list as the root object: tensors (one a view of another), a string, a float64 scalar."""
    w = randn(3, 4, seed=1)
    obj = [w, torch.zeros(4, dtype=torch.int64), "label", w[1], torch.tensor(3.5, dtype=torch.float64)]
    torch.save(obj, path)


def _protocol_obj(seed):
    w = randn(3, 4, seed=seed)
    return {
        "weight": w,
        "weight_t": w.t(),
        "bias": torch.arange(4, dtype=torch.int64),
        "half": randn(2, 2, seed=seed + 1, dtype=torch.float16),
        "meta": {"step": 12, "name": "protocol", "dims": [3, 4]},
    }


@fixture
def make_protocol3(path):
    """A small dict of tensors saved with pickle_protocol=3 (same opcodes as 2, header 0x80 0x03)."""
    torch.save(_protocol_obj(3), path, pickle_protocol=3)


@fixture
def make_protocol4(path):
    """The same with pickle_protocol=4: FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL.
    torch.load(weights_only=True) refuses it (no FRAME support)."""
    torch.save(_protocol_obj(4), path, pickle_protocol=4)


@fixture
def make_protocol5(path):
    """The same with pickle_protocol=5 (no protocol-5-only opcode appears; header 0x80 0x05).
    torch.load(weights_only=True) refuses it (no FRAME support)."""
    torch.save(_protocol_obj(5), path, pickle_protocol=5)


@fixture
def make_from_buffer(path):
    """Saved with torch.save into io.BytesIO and written out: the records live
    under the top folder 'archive', not the file's stem."""
    buf = io.BytesIO()
    torch.save({"x": randn(2, 3, seed=6), "y": torch.arange(5, dtype=torch.int32)}, buf)
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    archive, _ = read_records(path)
    assert archive == "archive", archive


@fixture
def make_step_and_expand(path):
    """Views a reader must lay out from size/stride/offset alone: step slicing,
    expand (stride 0), diagonals, overlapping unfold windows, as_strided, a 0-dim
    select at a non-zero offset, an empty view past the last column."""
    t = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    obj = {
        "base": t,
        "rows_step2": t[::2],                         # [3,8] stride [16,1]
        "cols_step3": t[:, 1::3],                     # [6,3] stride [8,3] offset 1
        "both_steps": t[1::2, ::4],                   # [3,2] stride [16,4] offset 8
        "diagonal": t.diagonal(),                     # [6] stride [9]
        "diagonal_off2": t.diagonal(offset=2),        # [6] stride [9] offset 2
        "unfold": t.view(-1).unfold(0, 4, 2),         # [23,4] stride [2,1]: windows overlap
        "as_strided": t.as_strided((2, 3), (20, 3), 5),
        "select_0dim": t[3, 5],                       # [] offset 29
        "expand_col": t[:, :1].expand(6, 5),          # [6,5] stride [8,0]
        "empty_view": t[:, 8:],                       # [6,0] offset 8
        "broadcast": torch.arange(3, dtype=torch.float64).view(3, 1).expand(3, 4),  # own storage, stride [1,0]
        "scalar_expanded": torch.tensor(7, dtype=torch.int32).expand(2, 3),         # 1-element storage, stride [0,0]
    }
    assert obj["expand_col"].stride() == (8, 0) and obj["scalar_expanded"].stride() == (0, 0)
    assert obj["select_0dim"].dim() == 0 and obj["select_0dim"].storage_offset() == 29
    torch.save(obj, path)


@fixture
def make_requires_grad(path):
    """requires_grad and Parameters: leaf and non-leaf tensors with requires_grad=True,
    a requires_grad view sharing its base's storage, a Parameter with
    requires_grad=False, Parameters inside an OrderedDict, one of them a view at an
    offset into another saved tensor's storage, and one Parameter object reachable twice."""
    w = randn(3, 2, seed=7).requires_grad_()
    base = torch.arange(6, dtype=torch.float32)
    trainable = nn.Parameter(randn(2, 2, seed=8))
    obj = {
        "w": w,
        "w_t": w.t(),                              # view, requires_grad, same storage as w
        "w_times_2": w.detach() * 2 + w * 0,       # non-leaf: saved as a leaf with requires_grad
        "frozen": nn.Parameter(torch.ones(2), requires_grad=False),
        "modules": collections.OrderedDict([
            ("param", trainable),
            ("param_view", nn.Parameter(base[2:])),   # Parameter at offset 2 of base's storage
            ("buffer", base),
        ]),
        "param_again": [trainable],
    }
    assert obj["w_times_2"].grad_fn is not None
    torch.save(obj, path)
    back = torch.load(path, weights_only=True)
    assert back["w_times_2"].requires_grad and back["w_times_2"].grad_fn is None
    assert back["modules"]["param"] is back["param_again"][0]
    assert not back["frozen"].requires_grad and isinstance(back["frozen"], nn.Parameter)


@fixture
def make_same_object(path):
    """Tensor objects reachable by more than one path, which torch.save pickles once
    (BINPUT) and fetches again (BINGET), so torch.load gives one object (`a is b`):
    a tensor under two keys of one dict, twice in a list, twice in a tuple, in two
    nested dicts; a Parameter twice; a bfloat16 tensor (no legacy class:
    `_rebuild_tensor_v3`) twice; a view of the shared tensor's storage. Beside them,
    objects that are NOT the same although they look it: `t.view(t.shape)` (same
    storage, dtype and layout, another object) and `t.detach()`."""
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    p = nn.Parameter(randn(2, 2, seed=21))
    h = randn(3, seed=22, dtype=torch.bfloat16)
    obj = {
        "a": t,
        "b": t,
        "list": [t, t, h],
        "tuple": (t, p, t),
        "nested": {"x": {"y": t}, "z": {"w": {"v": t}}},
        "param": p,
        "param_again": [p],
        "half": h,
        "row": t[1],
        "look_alike": t.view(2, 3),
        "detached": t.detach(),
    }
    torch.save(obj, path)
    back = torch.load(path, weights_only=True)
    assert back["a"] is back["b"] is back["list"][0] is back["list"][1] is back["tuple"][0]
    assert back["a"] is back["nested"]["x"]["y"] is back["nested"]["z"]["w"]["v"]
    assert back["param"] is back["param_again"][0] is back["tuple"][1]
    assert back["half"] is back["list"][2]
    assert back["look_alike"] is not back["a"] and back["detached"] is not back["a"]
    assert back["row"].untyped_storage().data_ptr() == back["a"].untyped_storage().data_ptr()


@fixture
def make_autograd_mlp(path):
    """PyTorch's gradients for tests/it/autograd.rs: a 3 -> 5 -> 2 relu network in
    float64 on fixed data, loss mean((net(x) - y)^2) + log(sum(exp(w1.t()[0:2]))),
    after one backward. Saves x, y, the parameters (leaves with requires_grad),
    their .grad as plain tensors, and the loss."""
    x, y = randn(6, 3, seed=20, dtype=torch.float64), randn(6, 2, seed=21, dtype=torch.float64)
    params = {
        "w1": randn(3, 5, seed=22, dtype=torch.float64).requires_grad_(),
        "b1": randn(5, seed=23, dtype=torch.float64).requires_grad_(),
        "w2": randn(5, 2, seed=24, dtype=torch.float64).requires_grad_(),
        "b2": randn(2, seed=25, dtype=torch.float64).requires_grad_(),
    }
    hidden = torch.relu(x @ params["w1"] + params["b1"])
    out = hidden @ params["w2"] + params["b2"]
    loss = ((out - y) ** 2).mean() + params["w1"].t()[0:2].exp().sum().log()
    loss.backward()
    torch.save({
        "x": x,
        "y": y,
        "params": params,
        "grads": {k: p.grad.clone() for k, p in params.items()},
        "loss": loss.detach(),
    }, path)


@fixture
def make_state_dict_linear(path):
    """nn.Sequential(Linear, ReLU, Linear).state_dict() with the two weights tied:
    state_dict() lists both keys as separate detached tensor objects over one
    storage (one data record, two _rebuild_tensor_v2 calls with the same key)."""
    torch.manual_seed(9)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
    model[2].weight = model[0].weight
    sd = model.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert sd["0.weight"] is not sd["2.weight"]
    assert sd["0.weight"].data_ptr() == sd["2.weight"].data_ptr()
    torch.save(sd, path)
    back = torch.load(path, weights_only=True)
    assert back["0.weight"].untyped_storage().data_ptr() == back["2.weight"].untyped_storage().data_ptr()
    assert back._metadata == sd._metadata


@fixture
def make_conj_neg(path):
    """Lazy conjugate/negative views: the stored bytes are the plain values and the
    7th _rebuild_tensor_v2 argument is a metadata dict {'conj': True} / {'neg': True}.
    Includes the real-world source of a neg bit, .imag of a conj view (a float32
    view over complex memory, saved alone as FloatStorage)."""
    z = torch.complex(torch.arange(4.0), torch.arange(4.0) + 10)
    x = torch.arange(3, dtype=torch.float32)
    other = torch.complex(torch.tensor([1.0, 2.0]), torch.tensor([-3.0, 4.0]))
    obj = {
        "z": z,
        "z_conj": z.conj(),
        "z_tail_conj": z[1:].conj(),
        "x": x,
        "x_neg": torch._neg_view(x),
        "imag_of_conj": other.conj().imag,
    }
    assert obj["z_conj"].is_conj() and obj["x_neg"].is_neg() and obj["imag_of_conj"].is_neg()
    torch.save(obj, path)
    back = torch.load(path, weights_only=True)
    assert back["z_conj"].is_conj() and back["x_neg"].is_neg() and back["imag_of_conj"].is_neg()
    assert torch.equal(back["z_conj"].resolve_conj(), z.conj().resolve_conj())


def _big_endian_obj():
    f = randn(2, 3, seed=10)
    return {
        "float32": f,
        "float32_t": f.t(),
        "float64": randn(3, seed=11, dtype=torch.float64),
        "float16": randn(2, 2, seed=12, dtype=torch.float16),
        "bfloat16": randn(2, 2, seed=13, dtype=torch.bfloat16),
        "int16": torch.tensor([1, -2, 0x1234], dtype=torch.int16),
        "int32": torch.tensor([1, -2, 0x12345678], dtype=torch.int32),
        "int64": torch.tensor([1, -2, 0x123456789ABCDEF], dtype=torch.int64),
        "complex64": torch.complex(torch.tensor([1.5, -2.0]), torch.tensor([0.25, 3.0])),
        "complex128": torch.complex(torch.tensor([1.5], dtype=torch.float64), torch.tensor([-0.5], dtype=torch.float64)),
        "uint8": torch.tensor([1, 2, 255], dtype=torch.uint8),
        "int8": torch.tensor([-1, 2, -128], dtype=torch.int8),
        "bool": torch.tensor([True, False, True]),
    }


@fixture
def make_big_endian(path):
    """A synthetic big-endian checkpoint: torch.save's file with `byteorder` = 'big'
    and every storage record byte-swapped per element (each half for complex).
    torch.load swaps back, so it must read the original values. Only legacy-storage
    dtypes: torch never swaps v3 (uint16/32/64, float8) storages."""
    obj = _big_endian_obj()
    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, os.path.basename(path))
        torch.save(obj, plain)
        archive, records = read_records(plain)
    types = storage_types(dict(records)["data.pkl"])
    out = []
    for name, data in records:
        if name == "byteorder":
            assert data == b"little"
            data = b"big"
        elif name.startswith("data/"):
            data = byteswap(data, element_swap_size(types[name[5:]]))
        out.append((name, data))
    with open(path, "wb") as f:
        f.write(build_zip(archive, out))
    back = torch.load(path, weights_only=True)
    assert same_tensors(back, obj), "torch did not read the original values back"


@fixture
def make_old_layout(path):
    """An older writer's layout (PyTorch ~2.0-2.2), made by rewriting torch.save's
    records: no .format_version / .storage_alignment, and data/<key> records in
    lexicographic key order (0, 1, 10, 11, 2, ...) over 12 storages of different
    sizes, so a reader that assumes numeric order or sequential offsets fails."""
    obj = {f"t{i}": torch.arange(i + 1, dtype=torch.float32) * (i + 1) for i in range(12)}
    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, os.path.basename(path))
        torch.save(obj, plain)
        archive, records = read_records(plain)
    rec = dict(records)
    keys = sorted(n[5:] for n in rec if n.startswith("data/"))      # string order
    assert keys[:4] == ["0", "1", "10", "11"]
    names = ["data.pkl", "byteorder"] + [f"data/{k}" for k in keys] + ["version", ".data/serialization_id"]
    with open(path, "wb") as f:
        f.write(build_zip(archive, [(n, rec[n]) for n in names]))
    back = torch.load(path, weights_only=True)
    assert same_tensors(back, obj)


@fixture
def make_pointer_keys(path):
    """A ~1.9-era layout: storage keys are decimal C-pointer strings
    (data/140000000004096 ...), records sorted as strings, no byteorder,
    .format_version, .storage_alignment or serialization id; just data.pkl,
    data/*, version. torch.load must then assume little-endian."""
    obj = {"a": randn(2, 2, seed=14), "b": torch.arange(3, dtype=torch.int64)}
    obj["a_row"] = obj["a"][1]
    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, os.path.basename(path))
        torch.save(obj, plain)
        archive, records = read_records(plain)
    rec = dict(records)
    keys = [n[5:] for n in rec if n.startswith("data/")]
    # widths differ on purpose so that string order differs from numeric order
    mapping = {k: str(9 * 10**13 + 4096 * int(k)) if int(k) % 2 else str(140000000000000 + 64 * int(k)) for k in keys}
    new = [("data.pkl", rekey_pickle(rec["data.pkl"], mapping))]
    new += [(f"data/{mapping[k]}", rec[f"data/{k}"]) for k in sorted(keys, key=lambda k: mapping[k])]
    new += [("version", rec["version"])]
    with open(path, "wb") as f:
        f.write(build_zip(archive, new))
    back = torch.load(path, weights_only=True)
    assert same_tensors(back, obj)


@fixture
def make_legacy_views(path):
    """The legacy single-stream format (_use_new_zipfile_serialization=False) with
    storages shared between views (row, column, transpose, Parameter at an offset),
    several dtypes and an empty tensor. Pointer keys are renamed to fixed numbers
    in order of first use."""
    base = randn(4, 5, seed=15)
    ints = torch.arange(6, dtype=torch.int64)
    obj = {
        "base": base,
        "row": base[1],
        "col": base[:, 2],
        "t": base.t(),
        "param": nn.Parameter(base[2, 1:]),
        "ints": ints,
        "ints_tail": ints[2:],
        "half": randn(3, seed=16, dtype=torch.float16),
        "bool": torch.tensor([True, False]),
        "int8": torch.tensor([-3, 4], dtype=torch.int8),
        "float64": torch.tensor([1.0, -2.5], dtype=torch.float64),
        "empty": torch.empty(0, dtype=torch.float32),
    }
    legacy_save_stable(obj, path)
    back = torch.load(path, weights_only=True)
    assert same_tensors(back, obj)
    assert back["row"].untyped_storage().data_ptr() == back["param"].untyped_storage().data_ptr()


@fixture
def make_quantized(path):
    """Per-tensor affine quantized tensors (_rebuild_qtensor with a
    (torch.per_tensor_affine, scale, zero_point) tuple): quint8, its transpose on the
    same storage, qint8, qint32. The manifest hashes int_repr()."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized creation is deprecated in 2.15
        q = torch.quantize_per_tensor(randn(2, 3, seed=17), 0.1, 10, torch.quint8)
        obj = {
            "quint8": q,
            "quint8_t": q.t(),
            "qint8": torch.quantize_per_tensor(randn(4, seed=18), 0.05, -3, torch.qint8),
            "qint32": torch.quantize_per_tensor(randn(3, seed=19), 0.01, 0, torch.qint32),
        }
    torch.save(obj, path)


@fixture
def make_uint_and_float8(path):
    """v3 dtypes (uint16/32/64, the five float8s) as non-contiguous views with
    offsets and strides, rebuilt by _rebuild_tensor_v3 over an untyped storage
    (numel counts bytes). One storage is viewed as uint16, float8_e5m2 and uint8 at
    once: v3 views register as uint8 so torch.save allows it (a v2 int16 view would not)."""
    ints = torch.arange(24, dtype=torch.int32).reshape(4, 6) * 1000 + 7
    floats = torch.rand(4, 6, generator=seeded(20)) * 4 + 0.25
    u16 = ints.to(torch.uint16)
    u32 = (ints * 70000).to(torch.uint32)
    u64 = ints.to(torch.int64).mul(2**35).to(torch.uint64)
    pair = torch.arange(16, dtype=torch.int32).mul(4099).to(torch.uint16)
    obj = {
        "uint16_t": u16.t(),                          # [6,4] stride [1,6]
        "uint16_cols": u16[:, 1::2],                  # offset 1
        "uint32_block": u32[1:, 2:],                  # offset 8
        "uint64_rows_step": u64[::3],                 # [2,6] stride [18,1]
        "float8_e4m3fn_t": floats.to(torch.float8_e4m3fn).t(),
        "float8_e5m2_diag": floats.to(torch.float8_e5m2).diagonal(1),
        "float8_e4m3fnuz_tail": floats.to(torch.float8_e4m3fnuz)[2:, ::2],
        "float8_e5m2fnuz_col": floats.to(torch.float8_e5m2fnuz)[:, 3],
        "float8_e8m0fnu_0dim": floats.to(torch.float8_e8m0fnu)[3, 4],
        "pair_uint16": pair[1:],                                      # offset 1 (2 bytes)
        "pair_float8_e5m2": pair.view(torch.float8_e5m2)[4:].view(7, 4)[:, ::2],  # offset 4
        "pair_uint8": pair.view(torch.uint8),                        # v2 ByteStorage, same key
    }
    torch.save(obj, path)
    back = torch.load(path, weights_only=True)
    ptrs = {back[k].untyped_storage().data_ptr() for k in ("pair_uint16", "pair_float8_e5m2", "pair_uint8")}
    assert len(ptrs) == 1


@fixture
def make_training_checkpoint(path):
    """What a training loop saves: {"model": state_dict, "optimizer": Adam's
    state_dict after one step (per-parameter state keyed by int, param_groups
    with floats, tuples, bools and None), "epoch": 3, "config": {...}} with
    every kind of non-tensor leaf the CLI contract names. Beside it,
    training_checkpoint.values.json: the contract's "values" list for it, as
    Python sees the loaded object (values_manifest)."""
    torch.manual_seed(11)
    model = nn.Linear(4, 3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    torch.save({
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "epoch": 3,
        "config": {
            "lr": 1e-3,
            "name": "gpt",
            "betas": (0.9, 0.999),
            "layers": [4, 3],
            "amp": False,
            "seed": None,
            "dtype": torch.bfloat16,
            "device": torch.device("cpu"),
            "shape": torch.Size([4, 3]),
            "big": 2**60 + 1,
            "huge": 2**70,
            "best": float("inf"),
            "worst": float("-inf"),
            "undefined": float("nan"),
            "z": complex(1.5, -2.0),
            "blob": b"\x00\xffab",
            "empty": {"d": {}, "l": [], "t": ()},
            7: "int key",
        },
    }, path)
    back = torch.load(path, weights_only=True)
    assert back["optimizer"]["state"][0]["step"].item() == 1
    with open(os.path.join(os.path.dirname(path), "training_checkpoint.values.json"), "w") as f:
        json.dump(values_manifest(back), f, indent=1)
        f.write("\n")


@fixture
def make_deflated_records(path):
    """A torch.save archive rewritten with every data/ record deflated (zipfile,
    ZIP_DEFLATED): PyTorch reads deflated records (miniz inflates them), and a
    lazy load must read them in windows. Two 32 KiB tensors of repeating values."""
    import zipfile
    torch.save({
        "ramp": torch.arange(8192, dtype=torch.float32) % 97,
        "steps": (torch.arange(4096, dtype=torch.int64) // 5).reshape(64, 64),
        "epoch": 3,
    }, path)
    with zipfile.ZipFile(path) as z:
        records = [(i, z.read(i)) for i in z.infolist()]
    with zipfile.ZipFile(path, "w") as z:
        for info, data in records:
            method = zipfile.ZIP_DEFLATED if "/data/" in info.filename else zipfile.ZIP_STORED
            z.writestr(zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0)), data, compress_type=method)
    back = torch.load(path, weights_only=True)
    assert back["steps"][63, 63].item() == 4095 // 5


# --------------------------------------------------------------------------- driver

def weights_only_verdict(path):
    """None if torch.load(weights_only=True) accepts path, else its error's last line."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.load(path, weights_only=True, map_location="cpu")
        return None
    except Exception as e:  # noqa: BLE001 - any refusal is what we record
        lines = [l for l in str(e).splitlines() if l.strip()]
        detail = [l for l in lines if "Unsupported" in l or "error" in l.lower()]
        return (detail or lines or [type(e).__name__])[-1].strip()


def build(name, out_dir):
    path = os.path.join(out_dir, name + ".pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        FIXTURES[name](path)
    size = os.path.getsize(path)
    assert size <= MAX_BYTES, f"{name}.pt is {size} bytes, over {MAX_BYTES}"
    verdict = weights_only_verdict(path)
    expect_refused = name in NEEDS_WEIGHTS_ONLY_FALSE
    if (verdict is not None) != expect_refused:
        raise SystemExit(f"{name}.pt: weights_only=True {'refused: ' + verdict if verdict else 'accepted'}, "
                         f"but NEEDS_WEIGHTS_ONLY_FALSE says otherwise; update it and the README")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        entries = manifest(path)
    with open(path + ".json", "w") as f:
        json.dump(entries, f, indent=1)
        f.write("\n")
    note = f"weights_only=True refused: {verdict}" if verdict else "weights_only=True ok"
    print(f"{name}.pt  {size} bytes  {len(entries)} tensors  {note}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="fixture directory (default: %(default)s)")
    ap.add_argument("names", nargs="*", help=f"fixtures to make (default: all of {', '.join(FIXTURES)})")
    args = ap.parse_args()
    unknown = [n for n in args.names if n not in FIXTURES]
    if unknown:
        ap.error(f"unknown fixture(s): {', '.join(unknown)}")
    os.makedirs(args.out, exist_ok=True)
    print(f"torch {torch.__version__}")
    for name in args.names or FIXTURES:
        build(name, args.out)


if __name__ == "__main__":
    main()
