#!/usr/bin/env python3
"""Writes crates/stowage/tests/fixtures/arith_cases.json: what PyTorch's
out-of-place + - * / give for every pair of operand kinds: a 1-D tensor or a
0-dim tensor of each dtype with arithmetic, or a Python number, on the right.
Each case records the result's dtype and values (as repr strings, exact), or
PyTorch's error message.
usage: ~/.torch-venv/bin/python scripts/gen-arith-cases.py"""
import json, os, torch

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16",
          "bfloat16", "float32", "float64", "complex64", "complex128"]
OPS = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}


def left(dtype, zero_dim):
    """The left operand's values: two, or one for a 0-dim tensor."""
    if dtype == "float8_e8m0fnu":  # powers of two only
        v = [4.0, 0.5]
    elif dtype == "bool":
        v = [True, False]
    elif dtype.startswith("complex"):
        v = [3 + 1j, 5 - 2j]
    else:
        v = [3, 5]
    return v[0] if zero_dim else v


def right(dtype, zero_dim):
    if dtype == "float8_e8m0fnu":
        v = [2.0, 8.0]
    elif dtype == "bool":
        v = [True, True]
    elif dtype.startswith("complex"):
        v = [2 - 1j, 7 + 0.5j]
    else:
        v = [2, 7]
    return v[0] if zero_dim else v


NUMBERS = [True, 2, 0.5, 1.5 + 0.5j]


def encode(v):
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, complex):
        return [repr(v.real), repr(v.imag)]
    return repr(float(v)) if isinstance(v, float) else str(v)


def encode_list(v):
    return [encode(x) for x in v] if isinstance(v, list) else [encode(v)]


# Operands by name: "L:int8/1" is the left 1-D int8 tensor, "R:float16/0" the
# right 0-dim float16 tensor, "N:0.5" the Python number 0.5.
operands, values = {}, {}
for side, make in (("L", left), ("R", right)):
    for d in DTYPES:
        for dim in (1, 0):
            key = f"{side}:{d}/{dim}"
            values[key] = make(d, dim == 0)
            operands[key] = encode_list(values[key])
for n in NUMBERS:
    key = "N:" + repr(n)
    values[key] = n
    operands[key] = encode(n)


def build(key):
    v = values[key]
    if key.startswith("N:"):
        return v
    return torch.tensor(v, dtype=getattr(torch, key[2:].split("/")[0]))



# Each case: [op, left, right, result dtype, result values] or
# [op, left, right, null, PyTorch's error message].
cases = []
for op_name, op in OPS.items():
    for lkey in (k for k in operands if k.startswith("L:")):
        for rkey in (k for k in operands if not k.startswith("L:")):
            try:
                r = op(build(lkey), build(rkey))
                assert list(r.shape) == ([] if lkey.endswith("/0") and not rkey.endswith("/1") else [2])
                cases.append([op_name, lkey, rkey, str(r.dtype).replace("torch.", ""),
                              encode_list(r.reshape(-1).tolist())])
            except AssertionError:
                raise
            except Exception as e:  # PyTorch refuses: keep its message
                cases.append([op_name, lkey, rkey, None, str(e).split("\n")[0]])

# Dtypes with few kernels (the wide unsigned integers, the 8-bit floats,
# complex32): each against itself (1-D and 0-dim), the numbers, and a 1-D
# float32 tensor, on either side of the operator.
EXTRA = ["uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2",
         "float8_e8m0fnu", "complex32"]
for side, make in (("L", left), ("R", right)):
    for d in EXTRA:
        for dim in (1, 0):
            key = f"{side}:{d}/{dim}"
            values[key] = make(d, dim == 0)
            operands[key] = encode_list(values[key])
for op_name, op in OPS.items():
    for d in EXTRA:
        for lkey in (f"L:{d}/1", f"L:{d}/0", "L:float32/1"):
            rkeys = [f"R:{d}/1", f"R:{d}/0"]
            if not lkey.startswith("L:float32"):
                rkeys += ["R:float32/1"] + [k for k in operands if k.startswith("N:")]
            for rkey in rkeys:
                try:
                    r = op(build(lkey), build(rkey))
                    cases.append([op_name, lkey, rkey, str(r.dtype).replace("torch.", ""),
                                  encode_list(r.reshape(-1).tolist())])
                except Exception as e:
                    cases.append([op_name, lkey, rkey, None, str(e).split("\n")[0]])

# Rounding in the narrow floats: 64 values of float16 and bfloat16 against
# numbers, a 0-dim float64 tensor and a float32 vector, out of place and in
# place ("add_", "mul_"): whether an operand is cast to the narrow dtype
# first or read at its own precision shows in the last bit. Keys ending in
# "/n" are vectors of their listed values, "/z" 0-dim tensors.
ROUNDING = [x * 0.37 - 11.0 for x in range(64)]
for d in ("float16", "bfloat16"):
    key = f"L:{d}/n"
    values[key] = torch.tensor(ROUNDING, dtype=getattr(torch, d)).tolist()
    operands[key] = encode_list(values[key])
values["R:float32/n"] = torch.tensor([1.0 + x / 7.0 for x in range(64)]).tolist()
operands["R:float32/n"] = encode_list(values["R:float32/n"])
values["R:float64/z"] = 0.1
operands["R:float64/z"] = encode_list(0.1)
for n in (0.1, 1.1):
    values["N:" + repr(n)] = n
    operands["N:" + repr(n)] = encode(n)
INPLACE = {"add_": torch.Tensor.add_, "mul_": torch.Tensor.mul_}
for op_name, op in list(OPS.items()) + list(INPLACE.items()):
    for d in ("float16", "bfloat16"):
        for rkey in ("N:0.1", "N:1.1", "R:float64/z", "R:float32/n"):
            lkey = f"L:{d}/n"
            try:
                a = build(lkey)
                r = op(a, build(rkey))
                cases.append([op_name, lkey, rkey, str(r.dtype).replace("torch.", ""),
                              encode_list(r.reshape(-1).tolist())])
            except Exception as e:
                cases.append([op_name, lkey, rkey, None, str(e).split("\n")[0]])

out = os.path.join(os.path.dirname(__file__), "..", "crates", "stowage", "tests",
                   "fixtures", "arith_cases.json")
with open(out, "w") as f:
    json.dump({"torch": torch.__version__, "default_dtype": str(torch.get_default_dtype())[6:],
               "operands": operands, "cases": cases}, f, separators=(",", ":"))
    f.write("\n")
print(out, len(cases), "cases")
