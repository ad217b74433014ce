#!/usr/bin/env python3
"""Generate crates/stowage/tests/data/minifloat_tables.txt from real PyTorch.

usage: python scripts/gen_minifloat_tables.py [OUT]
  (python = a venv with torch, e.g. from scripts/torch-venv.sh)

The table is the ground truth for src/minifloat.rs:

* ``decode NAME`` sections: f32 bit patterns that PyTorch's ``.float()``
  produces for every bit pattern of the format (256, or 16 for e2m1fn),
  16 per line, pattern order.
* ``f32`` section: one line per input, ``XXXXXXXX`` (f32 bits) then the
  encoded byte for each format, in ``FORMATS`` order, as two hex digits
  each, with no separator; ``--`` where there is no reference.
* ``f64`` section: the same for f64 inputs (16 hex digits), which PyTorch
  converts double -> float -> float8.

float8 results come from ``tensor.to(dtype).view(torch.uint8)`` (checked to
agree element by element with one-element tensors, which take the scalar
tail of the vectorised kernel). ``torch.float4_e2m1fn_x2`` is a "shell"
dtype: PyTorch has no cast to or from it (``copy_kernel`` is not
implemented), so its e2m1 reference is PyTorch's own test helper,
``torch.testing._internal.common_quantized._f32_to_floatx_unpacked`` /
``_floatx_unpacked_to_f32`` (copied from torchao), which produces unpacked
codes; its NaN output is unspecified, so NaN inputs get ``--``. Packing
(first element in the low nibble) is checked against ``pack_uint4`` and the
ONNX exporter's ``unpack_float4x2_as_uint8``.
"""

import ast
import random
import sys
import types

import numpy as np
import torch


def load_fp4_helpers():
    """PyTorch's fp4 reference helpers, without importing their module.

    ``torch.testing._internal.common_quantized`` imports ``expecttest`` and
    the rest of the test harness at import time; only these few functions
    (and the constants they read) are needed, so they are executed from
    PyTorch's own source.
    """
    import torch.testing._internal as ti

    path = ti.__path__[0] + "/common_quantized.py"
    tree = ast.parse(open(path).read())
    wanted = {"_n_ones", "_f32_to_floatx_unpacked", "_floatx_unpacked_to_f32",
              "down_size", "pack_uint4", "EBITS_F32", "MBITS_F32", "F32_EXP_BIAS"}
    body = []
    for node in tree.body:
        names = set()
        if isinstance(node, ast.FunctionDef):
            names = {node.name}
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        if names & wanted:
            body.append(node)
    ns = {"torch": torch, "Tensor": torch.Tensor}
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), ns)
    return types.SimpleNamespace(**ns)


cq = load_fp4_helpers()

FORMATS = [
    ("e4m3fn", torch.float8_e4m3fn),
    ("e5m2", torch.float8_e5m2),
    ("e4m3fnuz", torch.float8_e4m3fnuz),
    ("e5m2fnuz", torch.float8_e5m2fnuz),
    ("e8m0fnu", torch.float8_e8m0fnu),
    ("e2m1fn", None),
]

F32 = np.float32


def f32_from_bits(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def bits_of(xs):
    return np.asarray(xs, dtype=np.float32).view(np.uint32)


def decode(dt):
    if dt is None:
        codes = torch.arange(16, dtype=torch.uint8)
        return cq._floatx_unpacked_to_f32(codes, 2, 1).numpy().view(np.uint32)
    raw = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dt)
    return raw.float().numpy().view(np.uint32)


def encode(dt, xs):
    t = torch.from_numpy(np.ascontiguousarray(xs))
    if dt is None:
        assert t.dtype == torch.float32
        out = cq._f32_to_floatx_unpacked(t, 2, 1).numpy()
        return [None if np.isnan(x) else int(c) for x, c in zip(xs, out)]
    out = t.to(dt).view(torch.uint8).numpy()
    # Scalar tail of the kernel must agree with the vectorised body.
    for i in range(0, len(xs), 7):
        one = t[i : i + 1].to(dt).view(torch.uint8).item()
        assert one == out[i], (dt, xs[i], one, out[i])
    return [int(c) for c in out]


def check_fp4_packing():
    lo, hi = 0x3, 0xC  # 1.5, -2.0
    packed = cq.pack_uint4(torch.tensor([lo, hi], dtype=torch.uint8))
    assert packed.tolist() == [hi << 4 | lo], packed
    from torch.onnx._internal.exporter import _type_casting as tc

    x = torch.tensor([hi << 4 | lo], dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    assert tc.unpack_float4x2_as_uint8(x).tolist() == [lo, hi]
    try:
        x.float()
    except (NotImplementedError, RuntimeError):
        pass
    else:
        raise AssertionError("float4_e2m1fn_x2 now has a cast: update the table")


def tricky_f32(values):
    """Representable values, midpoints, the overflow threshold, neighbours."""
    fin = sorted({float(v) for v in values if np.isfinite(v)})
    pos = [v for v in fin if v > 0]
    gap = pos[-1] - pos[-2]
    pos_ext = pos + [pos[-1] + gap]  # the first value past max
    pts = set(pos_ext)
    for a, b in zip([0.0] + pos_ext, pos_ext):
        pts.add((a + b) / 2)
    out = set()
    for p in pts:
        x = F32(p)
        assert float(x) == p, p
        for y in (x, np.nextafter(x, F32(0)), np.nextafter(x, F32(np.inf))):
            out.add(float(y))
            out.add(-float(y))
    return out


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else (
        "crates/stowage/tests/data/minifloat_tables.txt"
    )
    check_fp4_packing()
    rng = random.Random(20240607)
    decoded = {name: decode(dt) for name, dt in FORMATS}

    xs = set()
    for name, _ in FORMATS:
        xs |= tricky_f32(decoded[name].view(np.float32))
    # e8m0 on f32 subnormals and near 2^-127 (its bit-level rounding).
    for b in (1, 2, 0x1FFFFF, 0x200000, 0x3FFFFF, 0x400000, 0x400001,
              0x500000, 0x5FFFFF, 0x600000, 0x600001, 0x7FFFFF, 0x800000):
        xs.add(float(f32_from_bits(b)))
        xs.add(-float(f32_from_bits(b)))
    for v in (0.0, 3.0e38, float(np.finfo(np.float32).max), 1e-30, 1e30):
        xs.add(v)
        xs.add(-v)
    xbits = {int(b) for b in bits_of(sorted(xs))}
    xbits |= {0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
              0x7F800001, 0xFFFFFFFF, 0x7FFFFFFF}
    for _ in range(1000):  # uniform over bit patterns: every magnitude
        xbits.add(rng.getrandbits(32))
    for _ in range(1000):  # log-uniform over the formats' ranges
        v = F32(rng.choice((-1, 1)) * 2.0 ** rng.uniform(-20, 17))
        xbits.add(int(bits_of([v])[0]))
    xbits = sorted(xbits)
    xs32 = f32_from_bits(xbits)
    enc = {name: encode(dt, xs32) for name, dt in FORMATS}

    # f64: values a hair above/below f32 ties (double rounding), range ends.
    d = set()
    for name, _ in FORMATS:
        fin = sorted({float(v) for v in decoded[name].view(np.float32)
                      if np.isfinite(v) and v > 0})
        for i, (a, b) in enumerate(zip(fin, fin[1:])):
            m = (a + b) / 2 * (-1) ** i
            d |= {m * (1 + 2.0**-40), m * (1 - 2.0**-40)} if i % 3 == 0 else set()
    d |= {1e300, -1e300, 1e-300, -1e-300, 4e38, 3.4028235677973366e38,
          float(np.finfo(np.float32).max) * (1 + 2.0**-30), 2.0**-150,
          2.0**-150 * (1 + 2.0**-30), 2.0**-127 * (1 + 2.0**-30),
          float("inf"), float("-inf"), float("nan")}
    for _ in range(100):
        d.add(rng.choice((-1, 1)) * 2.0 ** rng.uniform(-20, 17))
    xs64 = np.array(sorted(d, key=lambda v: (np.isnan(v), v)), dtype=np.float64)
    enc64 = {}
    for name, dt in FORMATS:
        if dt is None:
            with np.errstate(over="ignore"):
                enc64[name] = encode(None, xs64.astype(np.float32))
        else:
            enc64[name] = [int(c) for c in
                           torch.from_numpy(xs64).to(dt).view(torch.uint8).numpy()]

    def cell(c):
        return "--" if c is None else f"{c:02x}"

    lines = [
        f"# generated by scripts/gen_minifloat_tables.py with torch {torch.__version__};",
        "# do not edit. see the script for the format. columns: "
        + " ".join(n for n, _ in FORMATS),
    ]
    for name, _ in FORMATS:
        lines.append(f"decode {name}")
        dec = [f"{int(b):08x}" for b in decoded[name]]
        for i in range(0, len(dec), 16):
            lines.append(" ".join(dec[i : i + 16]))
    lines.append("f32")
    for i, b in enumerate(xbits):
        lines.append(f"{b:08x} " + "".join(cell(enc[n][i]) for n, _ in FORMATS))
    lines.append("f64")
    for i, v in enumerate(xs64.view(np.uint64)):
        lines.append(f"{int(v):016x} " + "".join(cell(enc64[n][i]) for n, _ in FORMATS))
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{out_path}: {len(xbits)} f32 inputs, {len(xs64)} f64 inputs", file=sys.stderr)


if __name__ == "__main__":
    main()
