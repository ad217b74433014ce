#!/usr/bin/env python3
"""Writes crates/stowage/tests/fixtures/display_cases.json: str(tensor) as
PyTorch prints it (default print options) for a table of tensors: line
wrapping and the suffixes' own wrapping, summarization (more than 1000
elements, 3 edge items), fixed/integer/scientific notation, every printable
dtype, empty and 0-dim tensors, requires_grad, negative zero, nan and inf,
large and small magnitudes, several dimensions.

Each case gives the dtype, the shape and the values exactly (repr strings;
[re, im] for complex), or, for big tensors, `arange`: value i is
start + i * step computed in float64 and cast to the dtype.
usage: ~/.torch-venv/bin/python scripts/gen-display-cases.py"""
import json, math, os, torch

torch.manual_seed(0)
cases = []


def encode(v):
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, complex):
        return [repr(v.real), repr(v.imag)]
    if isinstance(v, float):
        return repr(v)
    return str(v)


def add(name, t, requires_grad=False, arange=None, then=None):
    dtype = str(t.dtype).replace("torch.", "")
    case = {"name": name, "dtype": dtype, "shape": list(t.shape)}
    if arange is not None:
        case["arange"] = [repr(float(arange[0])), repr(float(arange[1]))]
    else:
        flat = t.reshape(-1)
        if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                       torch.float8_e5m2fnuz, torch.float8_e8m0fnu):
            flat = flat.float()
        case["values"] = [encode(v) for v in flat.tolist()]
    if requires_grad:
        t = t.detach().requires_grad_(True)
        case["requires_grad"] = True
    # An operation on the tensor, so that it prints a grad_fn: "mul2" is
    # t * 2, "sum" is t.sum().
    if then == "mul2":
        t = t * 2
    elif then == "sum":
        t = t.sum()
    if then is not None:
        case["then"] = then
    case["str"] = str(t)
    assert repr(t) == case["str"]
    cases.append(case)


def ar(name, n, dtype, shape, start=0.0, step=1.0):
    t = (torch.arange(n, dtype=torch.float64) * step + start).to(dtype).reshape(shape)
    add(name, t, arange=(start, step))


F, D, H, B = torch.float32, torch.float64, torch.float16, torch.bfloat16
# Suffixes naming the grad_fn.
add("randn(8) float16 * 2", torch.randn(8).half(), requires_grad=True, then="mul2")
add("randn(8) float64 * 2", torch.randn(8, dtype=D), requires_grad=True, then="mul2")
add("randn(3) * 2", torch.randn(3), requires_grad=True, then="mul2")
add("randn(2, 4).sum()", torch.randn(2, 4, dtype=D), requires_grad=True, then="sum")
# Line wrapping, and the dtype suffix moving to its own line.
add("randn(1, 8).half()", torch.randn(1, 8).half())
add("randn(8).half()", torch.randn(8).half())
add("randn(2, 8).half()", torch.randn(2, 8).half())
add("randn(9).bfloat16()", torch.randn(9).bfloat16())
add("randn(8) float32", torch.randn(8))
add("randn(30) float32", torch.randn(30))
add("randn(3, 5) float64", torch.randn(3, 5, dtype=D))
add("randn(2, 3, 4)", torch.randn(2, 3, 4))
add("randn(7) float64 wraps with dtype", torch.randn(7, dtype=D) * 1000)
add("randn(10) float64 requires_grad", torch.randn(10, dtype=D), requires_grad=True)
add("randn(6) float64 requires_grad", torch.randn(6, dtype=D) * 100, requires_grad=True)
add("randn(3) requires_grad", torch.randn(3), requires_grad=True)
add("randn(2, 2) half requires_grad", torch.randn(2, 2).half(), requires_grad=True)
add("randn(12) float16 requires_grad", torch.randn(12).half(), requires_grad=True)
ar("arange(100) int64", 100, torch.int64, [100])
ar("arange(100) int8", 100, torch.int8, [100], start=-50)
ar("arange(30) int32 * 1e6", 30, torch.int32, [30], step=1e6)
add("bools(50)", torch.arange(50) % 3 == 0)
ar("arange(64) uint8 (8, 8)", 64, torch.uint8, [8, 8], start=190)
# Summarization.
ar("arange(2000) float32", 2000, F, [2000])
ar("arange(2000) int64", 2000, torch.int64, [2000])
ar("arange(1001) float64", 1001, D, [1001], step=0.5)
ar("arange(1000) float32 (not summarized)", 1000, F, [1000], step=0.25)
ar("(40, 40) float32", 1600, F, [40, 40], start=-3.0, step=0.01)
ar("(10, 10, 11) int16", 1100, torch.int16, [10, 10, 11])
ar("(3, 400) float16", 1200, H, [3, 400], step=0.125)
ar("(500, 2, 1) float32", 1000 + 0, F, [500, 2, 1])
ar("(501, 2, 1) float32", 1002, F, [501, 2, 1])
ar("(2, 1001) bool", 2002, torch.bool, [2, 1001], start=0, step=0)
ar("(7, 7, 7, 7) float64", 2401, D, [7, 7, 7, 7], step=1e-3)
ar("(2000,) sci", 2000, F, [2000], start=1e-6, step=1.0)
# Notation: integer, fixed, scientific.
add("sci small", torch.tensor([1e-5, 1.0]))
add("sci large", torch.tensor([1e9, 1.0]))
add("sci ratio ints", torch.tensor([1.0, 1001.0]))
add("fixed ratio ints", torch.tensor([1.0, 1000.0]))
add("1e8 not sci", torch.tensor([1e8, 1.0]))
add("1e8+ sci", torch.tensor([100000008.0, 1.0]))
add("1e-4 fixed", torch.tensor([1e-4, 0.5], dtype=D))
add("tiny only", torch.tensor([1e-8]))
add("mixed precision", torch.tensor([0.1, 0.25, 123.456]))
add("ints as floats", torch.tensor([1.0, -2.0, 30.0]))
add("large ints sci", torch.tensor([1e10, 2e10, 3e10]))
add("f64 extremes", torch.tensor([1e300, 1e-300], dtype=D))
add("f32 max", torch.tensor([3.4028234663852886e38, 1.0]))
add("f16 extremes", torch.tensor([65504.0, 6e-8, 1.0], dtype=H))
add("bf16 values", torch.tensor([1.5, -2.0e10, 3.0e-10], dtype=B))
add("rounding ties", torch.tensor([0.00005, 0.00015, 0.125, 2.5, 1.00005], dtype=D))
add("half-way .0f", torch.tensor([0.5, 1.5, 2.5, 1001.5], dtype=D))
add("ties at 4 decimals", torch.tensor([0.03125, 0.09375, 1.03125, 2.0], dtype=D))
add("ties in sci", torch.tensor([1.03125, 1.09375e-5], dtype=D))
add("ties as ints", torch.tensor([2.0, 4.0, 1e9 + 0.0], dtype=D))
# Negative zero, nan, inf.
add("negative zero", torch.tensor([-0.0, 0.0, 1.5]))
add("negative zero ints", torch.tensor([-0.0, 2.0]))
add("only zeros", torch.tensor([0.0, -0.0]))
add("nan inf", torch.tensor([float("nan"), float("inf"), float("-inf"), 1.5]))
add("nan and int", torch.tensor([float("nan"), 1.0]))
add("all nan", torch.tensor([float("nan"), float("nan")]))
add("inf sci", torch.tensor([float("inf"), 1e-6, 1.0]))
add("nan f16", torch.tensor([float("nan"), -1.0], dtype=H))
# Dtypes.
add("int64", torch.tensor([1, -20, 300]))
add("int32", torch.tensor([1, -20, 300], dtype=torch.int32))
add("int16", torch.tensor([-32768, 32767], dtype=torch.int16))
add("int8", torch.tensor([-128, 5], dtype=torch.int8))
add("uint8", torch.tensor([0, 255], dtype=torch.uint8))
add("uint16", torch.tensor([0, 65535], dtype=torch.uint16))
add("uint32", torch.tensor([7, 4294967295], dtype=torch.uint32))
add("uint64", torch.tensor([7, 2**63], dtype=torch.uint64))
add("int64 extremes", torch.tensor([-2**63, 2**63 - 1]))
add("bool", torch.tensor([True, False, True]))
add("bool matrix", torch.tensor([[True], [False]]))
add("float16", torch.tensor([1.0, 2.5, -3.25], dtype=H))
add("bfloat16", torch.tensor([1.0, 2.5, -3.25], dtype=B))
add("float64", torch.tensor([1.0, 2.5, -3.25], dtype=D))
add("float8_e4m3fn", torch.tensor([1.0, -2.5, 448.0], dtype=torch.float8_e4m3fn))
add("float8_e5m2", torch.tensor([1.0, -2.5, 57344.0], dtype=torch.float8_e5m2))
add("complex64", torch.tensor([1 + 2j, -3.5 - 0.25j]))
add("complex128", torch.tensor([1e-5 + 1j, 2 - 3j], dtype=torch.complex128))
add("complex64 ints", torch.tensor([1 + 0j, 0 - 2j]))
add("complex nan", torch.tensor([complex(float("nan"), 1), complex(1, float("inf"))]))
add("complex negative zero", torch.tensor([complex(-0.0, -0.0), 1 + 1j]))
add("complex sci", torch.tensor([1e10 + 1e-10j, 1 + 1j]))
add("complex (3, 4)", torch.randn(3, 4, dtype=torch.complex64))
add("complex32", torch.tensor([1 + 2j, -0.5 + 0j], dtype=torch.complex32))
add("complex requires_grad", torch.randn(2, dtype=torch.complex64), requires_grad=True)
ar("complex64 summarized", 1200, torch.complex64, [1200], step=0.5)
# Empty and 0-dim.
add("empty float32", torch.zeros(0))
add("empty int64", torch.zeros(0, dtype=torch.int64))
add("empty bool", torch.zeros(0, dtype=torch.bool))
add("empty complex64", torch.zeros(0, dtype=torch.complex64))
add("empty (2, 0)", torch.zeros(2, 0))
add("empty (0, 3) float16", torch.zeros(0, 3, dtype=H))
add("empty requires_grad", torch.zeros(0), requires_grad=True)
add("0-dim float32", torch.tensor(3.5))
add("0-dim int", torch.tensor(7))
add("0-dim int32", torch.tensor(7, dtype=torch.int32))
add("0-dim bool", torch.tensor(False))
add("0-dim complex", torch.tensor(1 - 1j))
add("0-dim negative zero", torch.tensor(-0.0, dtype=D))
add("0-dim nan f16", torch.tensor(float("nan"), dtype=H))
add("0-dim sci", torch.tensor(1.5e-7))
add("0-dim requires_grad", torch.tensor(2.0), requires_grad=True)
# Several dimensions.
ar("(2, 3, 4) int64", 24, torch.int64, [2, 3, 4])
ar("(2, 1, 3) float32", 6, F, [2, 1, 3], step=0.5)
ar("(1, 1, 1) float64", 1, D, [1, 1, 1], start=2.0)
ar("(4, 1) int32", 4, torch.int32, [4, 1])
ar("(1, 30) float32", 30, F, [1, 30], step=1.125)
ar("(2, 2, 2, 2) bool", 16, torch.bool, [2, 2, 2, 2], step=0)
ar("(3, 0, 2) float32", 0, F, [3, 0, 2])
add("(2, 12) float64 wide", torch.randn(2, 12, dtype=D))
add("(5, 20) float32", torch.randn(5, 20))

out = os.path.join(os.path.dirname(__file__), "..", "crates", "stowage", "tests",
                   "fixtures", "display_cases.json")
with open(out, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, indent=0)
    f.write("\n")
print(out, len(cases), "cases")
