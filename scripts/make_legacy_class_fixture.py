#!/usr/bin/env python3
"""Write crates/stowage/tests/fixtures/legacy_classes.pt (+ .pt.json): a checkpoint
whose pickle names each of PyTorch's 17 legacy storage classes.

usage: make_legacy_class_fixture.py [--out DIR]
Run it with the python that scripts/torch-venv.sh prints (it needs real torch).

Contents (all deterministic, so rerunning gives the same bytes for a given torch):
  tensors.<Class>   one tensor per class that a plain or per-tensor-affine quantized
                    tensor can carry: the 12 non-quantized classes (2x3 each) and
                    QUInt8Storage, QInt8Storage, QInt32Storage (quantized, [5]).
                    Packed quint4x2/quint2x4 tensors are left out: their storage holds
                    ceil(n/2) or ceil(n/4) bytes for n elements.
  storages.<Class>  a bare storage of every class, all 17: torch.<Class>(values),
                    which torch.save pickles under the class name.
  shared_typed      float_tensor.storage(): a TypedStorage over the same bytes as
                    tensors.FloatStorage, so torch writes one record for both.
  untyped           an UntypedStorage (class UntypedStorage) for contrast.

Checks before writing the manifest: torch.load(weights_only=True) accepts the file and
gives back the same values; data.pkl names every one of the 17 classes (GLOBAL
'torch <Class>'); the shared storage has one record.
NAME.pt.json is torch_manifest.manifest(NAME.pt) (tensors only; storages are not listed).
"""
import argparse
import json
import os
import pickletools
import sys
import warnings
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)

import torch  # noqa: E402

from torch_manifest import manifest  # noqa: E402

DEFAULT_OUT = os.path.join(HERE, "..", "crates", "stowage", "tests", "fixtures")
NAME = "legacy_classes"

# PyTorch's 17 classes and their dtypes (torch/storage.py _dtype_to_storage_type_map).
CLASSES = {
    "DoubleStorage": torch.float64,
    "FloatStorage": torch.float32,
    "HalfStorage": torch.float16,
    "LongStorage": torch.int64,
    "IntStorage": torch.int32,
    "ShortStorage": torch.int16,
    "CharStorage": torch.int8,
    "ByteStorage": torch.uint8,
    "BoolStorage": torch.bool,
    "BFloat16Storage": torch.bfloat16,
    "ComplexDoubleStorage": torch.complex128,
    "ComplexFloatStorage": torch.complex64,
    "QUInt8Storage": torch.quint8,
    "QInt8Storage": torch.qint8,
    "QInt32Storage": torch.qint32,
    "QUInt4x2Storage": torch.quint4x2,
    "QUInt2x4Storage": torch.quint2x4,
}
QUANTIZED = {"QUInt8Storage", "QInt8Storage", "QInt32Storage", "QUInt4x2Storage", "QUInt2x4Storage"}
TENSOR_QUANTIZED = {"QUInt8Storage": (0.5, 3), "QInt8Storage": (0.25, -2), "QInt32Storage": (0.125, 7)}

# Values each bare storage holds (the test reads them back).
STORAGE_VALUES = {
    "DoubleStorage": [1.5, -2.25, 1e300],
    "FloatStorage": [1.5, -2.0, 3.0],
    "HalfStorage": [0.5, 65504.0, -1.0],
    "LongStorage": [-(2**62), 7, 2**62],
    "IntStorage": [-(2**31), 0, 2**31 - 1],
    "ShortStorage": [-32768, 1, 32767],
    "CharStorage": [-128, 0, 127],
    "ByteStorage": [0, 128, 255],
    "BoolStorage": [True, False, True],
    "BFloat16Storage": [1.0, -0.5, 256.0],
    "ComplexDoubleStorage": [1 + 2j, -3.5j, 4],
    "ComplexFloatStorage": [0.5 - 1j, 2j, -1],
    "QUInt8Storage": [0, 17, 255],
    "QInt8Storage": [-128, -1, 127],
    "QInt32Storage": [-(2**31), 5, 2**31 - 1],
    "QUInt4x2Storage": [0x21, 0xF0, 0x0F],
    "QUInt2x4Storage": [0xE4, 0x1B, 0x00],
}


def tensor_for(cls, dtype):
    if cls in TENSOR_QUANTIZED:
        scale, zero_point = TENSOR_QUANTIZED[cls]
        x = torch.tensor([-1.0, -0.25, 0.0, 0.75, 2.5])
        return torch.quantize_per_tensor(x, scale, zero_point, dtype)
    if dtype == torch.bool:
        return torch.tensor([[True, False, True], [False, True, False]])
    if dtype.is_complex:
        re = torch.arange(6, dtype=torch.float64).reshape(2, 3)
        return torch.complex(re, -re / 2).to(dtype)
    base = torch.arange(-2, 4, dtype=torch.float64).reshape(2, 3)
    if dtype.is_floating_point:
        base = base * 1.25
    return base.to(dtype)


def build():
    with warnings.catch_warnings():
        # TypedStorage and quantized creation are deprecated in 2.15; the file is the point.
        warnings.simplefilter("ignore")
        tensors = {}
        for cls, dtype in CLASSES.items():
            if cls in QUANTIZED and cls not in TENSOR_QUANTIZED:
                continue
            tensors[cls] = tensor_for(cls, dtype)
        storages = {cls: getattr(torch, cls)(STORAGE_VALUES[cls]) for cls in CLASSES}
        for cls, s in storages.items():
            assert s.dtype == CLASSES[cls] and isinstance(s, getattr(torch, cls)), cls
        return {
            "tensors": tensors,
            "storages": storages,
            "shared_typed": tensors["FloatStorage"].storage(),
            "untyped": torch.arange(4, dtype=torch.uint8).untyped_storage(),
        }


def named_classes(path):
    with zipfile.ZipFile(path) as z:
        pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        data = z.read(pkl)
        records = [n for n in z.namelist() if "/data/" in n]
    names = set()
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            module, name = arg.split(" ")
            if module == "torch" and name.endswith("Storage"):
                names.add(name)
    return names, records


def same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        if a.is_quantized:
            return b.is_quantized and a.q_scale() == b.q_scale() and torch.equal(a.int_repr(), b.int_repr())
        return a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, torch.TypedStorage):
        return type(b) is torch.TypedStorage and a.dtype == b.dtype and a.tolist() == b.tolist()
    if isinstance(a, torch.UntypedStorage):
        return a.tolist() == b.tolist()
    raise TypeError(type(a))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    path = os.path.join(args.out, NAME + ".pt")
    obj = build()
    torch.save(obj, path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = torch.load(path, weights_only=True)
        assert same(obj, back), "torch.load gave back other values"
        assert back["shared_typed"].untyped().data_ptr() == back["tensors"]["FloatStorage"].untyped_storage().data_ptr()
    names, records = named_classes(path)
    assert names == set(CLASSES), f"classes named: {sorted(names)}"
    # 15 tensors + 17 storages + untyped; shared_typed reuses the float tensor's record.
    assert len(records) == 15 + 17 + 1, records
    with open(path + ".json", "w") as f:
        json.dump(manifest(path), f, indent=1)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes), {len(names)} classes, {len(records)} records")


if __name__ == "__main__":
    main()
