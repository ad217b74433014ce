#!/usr/bin/env python3
"""Makes the "in the wild" fixtures of crates/stowage/tests/fixtures/wild/.

Checkpoints PyTorch's `weights_only=True` loader refuses, made with real
PyTorch: a whole `torch.save(model)` of built-in `torch.nn` modules, a
Lightning-style checkpoint with an `argparse.Namespace`, numpy arrays and
scalars, RNG states, `datetime`/`pathlib`/`collections` values; and hostile
files naming `os.system`, `builtins.eval` and `subprocess.Popen` (pickled by
`__reduce__`, never called here).

Beside each `NAME.pt` it writes `NAME.expected.json`: what
`torch.load(weights_only=False)` gives, as `stowage inspect --inert --json`
lists it (tensors: path, dtype, shape, parameter, requires_grad, sha256;
values in the CLI contract's form; objects: path, module, name), the paths
running through each object's pickled state (`__reduce_ex__(2)`) as the
contract says.

Run: ~/.torch-venv/bin/python scripts/make_wild_fixtures.py
"""

import argparse
import collections
import datetime
import hashlib
import json
import math
import os
import pathlib
import random
import sys

import numpy as np
import torch
from torch import nn

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "stowage", "tests", "fixtures", "wild")


def sha(b):
    return hashlib.sha256(b).hexdigest()


def tensor_bytes(t):
    t = t.detach().contiguous().cpu().reshape(-1)
    if t.numel() == 0:
        return b""
    return t.view(torch.uint8).numpy().tobytes()


def fl(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def num(i):
    return i if abs(i) <= 2**53 else str(i)


def np_name(dt):
    return dt.name if dt.kind in "biufc" else dt.str


def iso_offset(td):
    total = td.days * 86400 + td.seconds
    us = td.microseconds
    sign = "-" if total < 0 else "+"
    total_us = abs(total * 1_000_000 + us)
    secs, micros = divmod(total_us, 1_000_000)
    s = f"{sign}{secs // 3600:02}:{secs // 60 % 60:02}"
    if secs % 60 or micros:
        s += f":{secs % 60:02}"
    if micros:
        s += f".{micros:06}"
    return s


def time_text(t):
    s = f"{t.hour:02}:{t.minute:02}:{t.second:02}"
    if t.microsecond:
        s += f".{t.microsecond:06}"
    if t.tzinfo is not None:
        s += iso_offset(t.utcoffset())
    return s


class Walker:
    def __init__(self):
        self.tensors, self.values, self.objects = [], [], []

    def value(self, path, typ, **kw):
        self.values.append({"path": path, "type": typ, **kw})

    def walk(self, v, path):
        if isinstance(v, torch.Tensor):
            self.tensors.append({
                "path": path, "dtype": str(v.dtype).removeprefix("torch."), "shape": list(v.shape),
                "parameter": isinstance(v, nn.Parameter), "requires_grad": v.requires_grad,
                "sha256": sha(tensor_bytes(v)),
            })
        elif isinstance(v, np.ndarray):
            le = np.ascontiguousarray(v).astype(v.dtype.newbyteorder("<"))
            self.value(path, "ndarray", dtype=np_name(v.dtype), shape=list(v.shape), sha256=sha(le.tobytes()))
        elif isinstance(v, np.generic):
            x = v.item()
            val = [fl(x.real), fl(x.imag)] if isinstance(x, complex) else fl(x) if isinstance(x, float) else x if isinstance(x, bool) else num(x)
            self.value(path, "numpy_scalar", dtype=np_name(v.dtype), value=val)
        elif isinstance(v, np.dtype):
            self.value(path, "numpy_dtype", value=np_name(v))
        elif v is None:
            self.value(path, "none", value=None)
        elif isinstance(v, bool):
            self.value(path, "bool", value=v)
        elif isinstance(v, int):
            self.value(path, "int", value=num(v))
        elif isinstance(v, float):
            self.value(path, "float", value=fl(v))
        elif isinstance(v, complex):
            self.value(path, "complex", value=[fl(v.real), fl(v.imag)])
        elif isinstance(v, str):
            self.value(path, "str", value=v)
        elif isinstance(v, bytes):
            self.value(path, "bytes", value=v.hex())
        elif isinstance(v, torch.dtype):
            self.value(path, "dtype", value=str(v).removeprefix("torch."))
        elif isinstance(v, torch.Size):
            self.value(path, "size", value=list(v))
        elif isinstance(v, datetime.datetime):
            self.value(path, "datetime", value=f"{v.year:04}-{v.month:02}-{v.day:02}T" + time_text(v))
        elif isinstance(v, datetime.date):
            self.value(path, "date", value=v.isoformat())
        elif isinstance(v, datetime.time):
            self.value(path, "time", value=time_text(v))
        elif isinstance(v, datetime.timedelta):
            self.value(path, "timedelta", value=[v.days, v.seconds, v.microseconds])
        elif isinstance(v, datetime.timezone):
            offset = v.utcoffset(None).total_seconds()
            named = {"name": v.tzname(None)} if v.__reduce__()[1][1:] else {}
            self.value(path, "timezone", value=int(offset) if offset.is_integer() else offset, **named)
        elif isinstance(v, pathlib.PurePath):
            self.value(path, "path", **{"class": type(v).__name__}, value=str(v))
        elif isinstance(v, slice):
            self.value(path, "slice", value=[v.start, v.stop, v.step])
        elif isinstance(v, range):
            self.value(path, "range", value=[v.start, v.stop, v.step])
        elif isinstance(v, argparse.Namespace):
            self.container(vars(v), path, "dict", "argparse.Namespace")
        elif isinstance(v, (collections.defaultdict, collections.Counter)):
            self.container(v, path, "dict", f"collections.{type(v).__name__}")
        elif isinstance(v, dict):
            self.container(v, path, "dict")
        elif isinstance(v, collections.deque):
            self.container(list(v), path, "list", "collections.deque")
        elif isinstance(v, list):
            self.container(list(v), path, "list")
        elif isinstance(v, tuple):
            self.container(v, path, "tuple")
        elif isinstance(v, (set, frozenset)):
            self.container(list(v), path, "list", type(v).__name__)
        else:
            self.obj(v, path)

    def container(self, v, path, typ, cls=None):
        if len(v) == 0:
            # A type JSON lacks is listed as its container, with `class`.
            self.value(path, typ, value=[], **({"class": cls} if cls else {}))
            return
        items = v.items() if isinstance(v, dict) else enumerate(v)
        for k, x in items:
            self.walk(x, path + [k])

    def obj(self, v, path):
        """An object outside the allowlist: its pickled state, as stowage's inert loading sees it."""
        rv = v.__reduce_ex__(2)
        cls = rv[1][0] if rv[0].__name__ == "__newobj__" else rv[0]
        entry = {"path": path, "module": cls.__module__, "name": cls.__qualname__}
        self.objects.append(entry)
        state = rv[2] if len(rv) > 2 else None
        args = rv[1][1:] if rv[0].__name__ == "__newobj__" else rv[1]
        children = []
        if isinstance(state, dict):
            children += list(state.items())
        elif state is not None:
            children.append(("state", state))
        if args and not any(k == "args" for k, _ in children):
            children.append(("args", tuple(args)))
        if not children:
            self.value(path, "object", module=entry["module"], name=entry["name"], value=None)
        for k, x in children:
            self.walk(x, path + [k])


def save(name, obj, legacy=False):
    path = os.path.join(OUT, name)
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    loaded = torch.load(path, weights_only=False)
    w = Walker()
    w.walk(loaded, [])
    with open(path.rsplit(".", 1)[0] + ".expected.json", "w") as f:
        json.dump({"tensors": w.tensors, "values": w.values, "objects": w.objects}, f, indent=1)
        f.write("\n")


def constants_of(path):
    """The tuple `constants.pkl` holds, read with its storages from `constants/`."""
    import io
    import pickle
    import zipfile

    z = zipfile.ZipFile(path)
    prefix = z.namelist()[0].split("/")[0]

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):
            _, cls, key, _location, _numel = pid
            data = bytearray(z.read(f"{prefix}/constants/{key}"))
            storage = torch.UntypedStorage.from_buffer(data, dtype=torch.uint8)
            return torch.storage.TypedStorage(wrap_storage=storage, dtype=cls.dtype, _internal=True)

    return Unpickler(io.BytesIO(z.read(f"{prefix}/constants.pkl"))).load()


def save_script(name, module, attrs=()):
    """`torch.jit.save`, and the tensors `torch.jit.load` gives: the state dict
    by its dotted names, the tensors of the attributes named in `attrs` (not
    in a state dict), then `constants.pkl`'s under `CONSTANTS`."""
    import warnings

    path = os.path.join(OUT, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.save(module, path)
        loaded = torch.jit.load(path)
    w = Walker()
    for a in attrs:  # in the order the pickle holds them: before the submodules
        w.walk(getattr(loaded, a), [a])
    for k, t in loaded.state_dict(keep_vars=True).items():
        w.walk(t, k.split("."))
    for i, t in enumerate(constants_of(path)):
        w.walk(t, ["CONSTANTS", i])
    with open(path.rsplit(".", 1)[0] + ".expected.json", "w") as f:
        json.dump({"tensors": w.tensors, "root": loaded.original_name}, f, indent=1)
        f.write("\n")


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("scale", torch.tensor([0.5, 2.0]))

    def forward(self, x):
        return self.lin(x) * self.scale * torch.tensor([1.5, 2.5])


class Typed(nn.Module):
    """Typed list and dict attributes: TorchScript's pickler wraps them in
    `torch.jit._pickle.build_intlist` … and `restore_type_tag`."""

    sizes: list[int]
    rates: list[float]
    flags: list[bool]
    names: dict[str, int]

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.sizes = [3, 1, 4]
        self.rates = [0.5, 1.5]
        self.flags = [True, False]
        self.names = {"a": 1}
        self.extra = [torch.ones(2), torch.zeros(3)]

    def forward(self, x):
        return self.lin(x) * float(len(self.sizes)) + self.extra[0]


class Hostile:
    """Pickles as a call of `fn(*args)`; loading it with weights_only=False would run it."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)

    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.LayerNorm(4))
    save("whole_module.pt", model)
    # The pre-1.6 format names each module class by a `('module', cls, file, source)` persistent id.
    save("whole_module_legacy.pt", {"model": model, "array": np.arange(3, dtype=np.int64)}, legacy=True)

    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(2, 3)).sum().backward()
    opt.step()
    save("lightning.ckpt", {
        "epoch": 3,
        "global_step": 120,
        "pytorch-lightning_version": "2.4.0",
        "state_dict": model.state_dict(),
        "hyper_parameters": argparse.Namespace(lr=1e-3, name="gpt", layers=[2, 3], dropout=None),
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [],
        "callbacks": {"ModelCheckpoint": {"best_model_score": torch.tensor(0.25), "best_k_models": {}}},
    })

    save("numpy.pt", {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f64_fortran": np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3) / 7),
        "zero_d": np.array(5, dtype=np.int16),
        "empty": np.zeros((0, 3), dtype=np.int64),
        "bool": np.array([True, False, True]),
        "u8": np.arange(4, dtype=np.uint8),
        "u64": np.array([2**64 - 1, 1], dtype=np.uint64),
        "f16": np.array([0.5, -2.0], dtype=np.float16),
        "c64": np.array([1 + 2j, -3j], dtype=np.complex64),
        "big_endian": np.arange(3, dtype=">i4"),
        "scalars": {
            "f64": np.float64(0.25), "f32": np.float32(0.1), "i64": np.int64(-7),
            "u8": np.uint8(200), "bool": np.bool_(True), "c128": np.complex128(1 - 2j),
            "big_u64": np.uint64(2**63 + 1),
        },
        "dtype": np.dtype("float32"),
        "best_score": np.float64(0.875),
    })

    save("rng.pt", {
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
    })

    tz = datetime.timezone(datetime.timedelta(hours=5, minutes=30), "IST")
    save("pydata.pt", {
        "saved_at": datetime.datetime(2024, 1, 2, 3, 4, 5, 678901),
        "aware": datetime.datetime(2023, 12, 31, 23, 59, 59, tzinfo=tz),
        "utc": datetime.datetime(2020, 2, 29, 12, 0, tzinfo=datetime.timezone.utc),
        "day": datetime.date(1999, 12, 31),
        "at": datetime.time(8, 30, 0, 5),
        "took": datetime.timedelta(days=-1, seconds=5, microseconds=7),
        "zone": tz,
        "root": pathlib.PurePosixPath("/data/run1"),
        "rel": pathlib.PosixPath("runs/a/b.txt"),
        "counts": collections.defaultdict(int, {"a": 2, "b": 3}),
        "recent": collections.deque([1.5, 2.5], maxlen=4),
        "frozen": frozenset(["x"]),
        "window": slice(2, None, 3),
        "steps": range(0, 10, 2),
        "ordered": collections.OrderedDict([("k", torch.ones(2))]),
    })

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_script("torchscript.pt", torch.jit.script(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.LayerNorm(4))))
        save_script("torchscript_traced.pt", torch.jit.trace(Scaled(), torch.ones(1, 3)))
        save_script("torchscript_typed.pt", torch.jit.script(Typed()), attrs=["extra"])

    marker = "stowage_inert_marker_must_not_exist"
    import subprocess
    # Saved only: loading it with weights_only=False would run the calls.
    torch.save({
        "system": Hostile(os.system, (f"touch {marker}",)),
        "eval": Hostile(eval, (f"open('{marker}', 'w')",)),
        "popen": Hostile(subprocess.Popen, (["touch", marker],)),
        "weight": torch.arange(3.0),
    }, os.path.join(OUT, "hostile_calls.pt"))


if __name__ == "__main__":
    sys.exit(main())
