#!/usr/bin/env python3
"""Regenerates crates/stowage/tests/fixtures/py2/: checkpoints laid out byte
for byte as PyTorch 0.3/0.4 under Python 2 wrote them with torch.save (the
legacy stream, cPickle protocol 2), and beside each `<name>.torch.json`, what
real PyTorch (Python 3) makes of it with weights_only=True and False.

usage: make_py2_fixtures.py   (needs $TORCH_PY)

There is no Python 2 here, so the opcode streams are written by hand, as
Python 2.7's cPickle writes them at protocol 2:
- `str` (bytes) as SHORT_BINSTRING / BINSTRING, `unicode` as BINUNICODE;
- `int` as BININT1/BININT2/BININT, or the text INT opcode when it does not fit
  in 32 bits; `long` as LONG1 (LONG4 past 255 bytes; storage sizes are
  `long`s); floats as BINFLOAT;
- every string, list, dict, global and reduce result (not tuples) memoized with
  BINPUT, numbered from 1, a repeated object (a global, an interned string)
  fetched with BINGET;
- lists with APPEND (one item) or MARK ... APPENDS, dicts with SETITEM or
  MARK ... SETITEMS, tuples of 1-3 items with TUPLE1-3, else MARK ... TUPLE;
- `OrderedDict.__reduce__` of Python 2.7: `(OrderedDict, ([[k, v], ...],))`,
  plus the instance dict (`_metadata`) as BUILD state when there is one;
- the legacy sections: magic number (LONG1), protocol version 1001, sys_info
  (`little_endian`, `type_sizes` with py2 `long` of 8 bytes), the object, the
  sorted storage keys, then each storage as int64 element count + bytes;
- storages by persistent id `('storage', torch.FloatStorage, root_key,
  location, root_size, view_metadata)`, view_metadata `None` or
  `(view_key, offset, view_size)` (PyTorch 0.4's `persistent_id`).
These rules were checked against the opcodes of `lpips`' weights (PyTorch 0.x,
Python 2; scripts/wild-checkpoints.sh reads them).

Loading with weights_only=False is safe here: the files name only PyTorch's
own rebuild functions, OrderedDict, and in py2_copy_reg.pt
`copy_reg._reconstructor(object, object, None)`, which builds a plain object.
"""
import json
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "crates", "stowage", "tests", "fixtures", "py2")
MAGIC = 0x1950A86A20F9469CFC6C


class Py2Pickler:
    """A protocol 2 stream as Python 2.7's cPickle writes it."""

    def __init__(self):
        self.b = bytearray(b"\x80\x02")
        self.memo = {}

    def op(self, data):
        self.b += data
        return self

    def put(self, key=None):
        i = len(self.memo) + 1  # cPickle numbers its memo from 1
        if key is not None:
            self.memo[key] = i
        else:
            self.memo[("anon", i)] = i
        return self.op(b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i))

    def get(self, key):
        i = self.memo[key]
        return self.op(b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i))

    def str_(self, s):
        """A Python 2 `str` (bytes); equal strings are one interned object."""
        data = s if isinstance(s, bytes) else s.encode("ascii")
        key = ("str", data)
        if key in self.memo:
            return self.get(key)
        if len(data) < 256:
            self.op(b"U" + bytes([len(data)]) + data)
        else:
            self.op(b"T" + struct.pack("<i", len(data)) + data)
        return self.put(key)

    def fresh_str(self, s):
        """A `str` built at run time (`location_tag`'s): a new object, not a
        memo hit."""
        data = s.encode("ascii")
        self.op(b"U" + bytes([len(data)]) + data)
        return self.put()

    def unicode_(self, s):
        data = s.encode("utf-8")
        self.op(b"X" + struct.pack("<I", len(data)) + data)
        return self.put()

    def int_(self, v):
        if 0 <= v < 256:
            return self.op(b"K" + bytes([v]))
        if 0 <= v < 65536:
            return self.op(b"M" + struct.pack("<H", v))
        if -2**31 <= v < 2**31:
            return self.op(b"J" + struct.pack("<i", v))
        return self.op(b"I" + str(v).encode() + b"\n")  # a 64-bit py2 int

    def long_(self, v):
        n = (v.bit_length() + 8) // 8 if v else 0
        data = v.to_bytes(n, "little", signed=True) if n else b""
        if n < 256:
            return self.op(b"\x8a" + bytes([n]) + data)
        return self.op(b"\x8b" + struct.pack("<i", n) + data)

    def float_(self, v):
        return self.op(b"G" + struct.pack(">d", v))

    def none(self):
        return self.op(b"N")

    def bool_(self, v):
        return self.op(b"\x88" if v else b"\x89")

    def global_(self, module, name):
        key = ("global", module, name)
        if key in self.memo:
            return self.get(key)
        self.op(b"c" + module.encode() + b"\n" + name.encode() + b"\n")
        return self.put(key)

    def tuple_(self, items):
        """`items`: callables that write one item each."""
        if not items:
            return self.op(b")")
        if len(items) <= 3:
            for f in items:
                f()
            self.op({1: b"\x85", 2: b"\x86", 3: b"\x87"}[len(items)])
        else:
            self.op(b"(")
            for f in items:
                f()
            self.op(b"t")
        return self  # cPickle memoizes no tuple (but a recursive one)

    def list_(self, items):
        self.op(b"]").put()
        if len(items) == 1:
            items[0]()
            self.op(b"a")
        elif items:
            self.op(b"(")
            for f in items:
                f()
            self.op(b"e")
        return self

    def dict_(self, pairs):
        """`pairs`: (key writer, value writer)."""
        self.op(b"}").put()
        if len(pairs) == 1:
            pairs[0][0]()
            pairs[0][1]()
            self.op(b"s")
        elif pairs:
            self.op(b"(")
            for k, v in pairs:
                k()
                v()
            self.op(b"u")
        return self

    def reduce_(self, callable_, args):
        callable_()
        args()
        return self.op(b"R").put()

    def ordered_dict(self, pairs, metadata=None):
        """Python 2.7's `OrderedDict.__reduce__`: items as two-item lists."""
        items = [lambda k=k, v=v: self.list_([k, v]) for k, v in pairs]
        self.reduce_(lambda: self.global_("collections", "OrderedDict"),
                     lambda: self.tuple_([lambda: self.list_(items)]))
        if metadata is not None:
            self.dict_([(lambda: self.str_("_metadata"), metadata)])
            self.op(b"b")
        return self

    def stop(self):
        return bytes(self.op(b".").b)


class Storage:
    def __init__(self, key, cls, fmt, values):
        self.key, self.cls, self.fmt, self.values = key, cls, fmt, values

    def data(self):
        return struct.pack("<q", len(self.values)) + struct.pack("<" + self.fmt * len(self.values),
                                                                 *self.values)


def persid(p, st, view=None):
    """The storage's persistent id, as PyTorch 0.4's persistent_id returns it."""
    p.tuple_([lambda: p.str_("storage"), lambda: p.global_("torch", st.cls),
              lambda: p.str_(st.key), lambda: p.fresh_str("cpu"),
              lambda: p.long_(len(st.values)),
              (lambda: p.none()) if view is None else
              (lambda: p.tuple_([lambda: p.str_(view[0]), lambda: p.int_(view[1]),
                                 lambda: p.int_(view[2])]))])
    p.op(b"Q")


def ints(p, values):
    return lambda: p.tuple_([lambda v=v: p.int_(v) for v in values])


def tensor_v2(p, st, offset, size, stride, view=None, hooks=True):
    """PyTorch 0.4: `_rebuild_tensor_v2(storage, offset, size, stride,
    requires_grad, backward_hooks)`, backward_hooks an empty OrderedDict, or
    None (as in `lpips`' weights)."""
    p.reduce_(lambda: p.global_("torch._utils", "_rebuild_tensor_v2"),
              lambda: p.tuple_([lambda: persid(p, st, view), lambda: p.int_(offset),
                                ints(p, size), ints(p, stride), lambda: p.bool_(False),
                                (lambda: p.ordered_dict([])) if hooks else (lambda: p.none())]))


def tensor_v1(p, st, offset, size, stride, view=None):
    """PyTorch 0.3: `_rebuild_tensor(storage, offset, size, stride)`."""
    p.reduce_(lambda: p.global_("torch._utils", "_rebuild_tensor"),
              lambda: p.tuple_([lambda: persid(p, st, view), lambda: p.int_(offset),
                                ints(p, size), ints(p, stride)]))


def legacy_file(obj_pickle, storages):
    head = Py2Pickler()
    head.long_(MAGIC)
    out = head.stop()
    p = Py2Pickler()
    p.int_(1001)
    out += p.stop()
    p = Py2Pickler()
    # Python 2 dict order (by hash), as the 0.4 files have it.
    p.dict_([(lambda: p.str_("little_endian"), lambda: p.bool_(True)),
             (lambda: p.str_("type_sizes"),
              lambda: p.dict_([(lambda: p.str_("int"), lambda: p.int_(4)),
                               (lambda: p.str_("long"), lambda: p.int_(8)),
                               (lambda: p.str_("short"), lambda: p.int_(2))])),
             (lambda: p.str_("protocol_version"), lambda: p.int_(1001))])
    out += p.stop()
    out += obj_pickle
    keys = sorted(s.key for s in storages)
    p = Py2Pickler()
    p.list_([lambda k=k: p.str_(k) for k in keys])
    out += p.stop()
    for k in keys:
        out += next(s for s in storages if s.key == k).data()
    return out


def state_dict():
    """An lpips-like 0.4 state dict: OrderedDict from item lists, with
    `_metadata`, tensors v2, a 0-dim LongTensor, two on one storage."""
    w = Storage("94155520331024", "FloatStorage", "f", [0.5 * i for i in range(6)])
    shared = Storage("94155520345152", "FloatStorage", "f", [1.0, -2.0, 3.5, 4.25])
    n = Storage("94155520360448", "LongStorage", "q", [7])
    p = Py2Pickler()
    meta = lambda: p.ordered_dict([(lambda: p.str_(""), lambda: p.dict_([
        (lambda: p.str_("version"), lambda: p.int_(1))])),
        (lambda: p.str_("net.0"), lambda: p.dict_([(lambda: p.str_("version"),
                                                    lambda: p.int_(1))]))])
    p.ordered_dict([
        (lambda: p.str_("net.0.weight"), lambda: tensor_v2(p, w, 0, (2, 3), (3, 1), hooks=False)),
        (lambda: p.str_("net.0.bias"), lambda: tensor_v2(p, shared, 0, (2,), (1,), hooks=False)),
        (lambda: p.str_("net.1.bias"), lambda: tensor_v2(p, shared, 2, (2,), (1,))),
        (lambda: p.str_("net.1.num_batches_tracked"), lambda: tensor_v2(p, n, 0, (), ())),
    ], metadata=meta)
    return legacy_file(p.stop(), [w, shared, n])


def rebuild_v1():
    """0.3 era: `_rebuild_tensor`, two tensors on one storage, a plain dict
    root, and a py2 `long` (LONG1)."""
    root = Storage("140234", "DoubleStorage", "d", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    p = Py2Pickler()
    p.dict_([
        (lambda: p.str_("epoch"), lambda: p.long_(5)),
        (lambda: p.str_("weight"), lambda: tensor_v1(p, root, 0, (2, 2), (2, 1))),
        (lambda: p.str_("tail"), lambda: tensor_v1(p, root, 4, (2,), (1,))),
        (lambda: p.str_("arch"), lambda: p.str_("alexnet")),
    ])
    return legacy_file(p.stop(), [root])


def storage_view():
    """A tensor on a storage view: view_metadata `(view_key, offset,
    view_size)` in its persistent id (what `persistent_id` wrote for a
    storage whose `_root_storage()` was another)."""
    root = Storage("140234", "FloatStorage", "f", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    p = Py2Pickler()
    p.dict_([
        (lambda: p.str_("whole"), lambda: tensor_v2(p, root, 0, (6,), (1,))),
        (lambda: p.str_("tail"),
         lambda: tensor_v2(p, root, 1, (2,), (1,), view=("140300", 3, 3))),
    ])
    return legacy_file(p.stop(), [root])


def text_ints():
    """Values only Python 2 writes this way: an int past 32 bits as the text
    INT opcode, a LONG4, a unicode string, a float."""
    w = Storage("1", "FloatStorage", "f", [1.0, 2.0])
    p = Py2Pickler()
    p.dict_([
        (lambda: p.str_("step"), lambda: p.int_(2**40 + 3)),
        (lambda: p.str_("huge"), lambda: p.long_(-(2**2100) + 1)),
        (lambda: p.str_("name"), lambda: p.unicode_(u"caf\u00e9")),
        (lambda: p.str_("lr"), lambda: p.float_(0.1)),
        (lambda: p.str_("w"), lambda: tensor_v2(p, w, 0, (2,), (1,))),
    ])
    return legacy_file(p.stop(), [w])


def non_utf8():
    """A Python 2 `str` holding bytes that are not UTF-8 (`'\\xff\\xfe'`)."""
    w = Storage("1", "FloatStorage", "f", [1.0])
    p = Py2Pickler()
    p.dict_([(lambda: p.str_("note"), lambda: p.str_(b"\xff\xfe")),
             (lambda: p.str_("w"), lambda: tensor_v2(p, w, 0, (1,), (1,)))])
    return legacy_file(p.stop(), [w])


def copy_reg():
    """`copy_reg._reconstructor(object, object, None)`: how Python 2 pickles
    an instance of a plain new-style class at protocols 0 and 1, here for
    `object` itself (harmless to run); outside PyTorch's allowlist."""
    w = Storage("1", "FloatStorage", "f", [1.0])
    p = Py2Pickler()
    p.dict_([(lambda: p.str_("obj"),
              lambda: p.reduce_(lambda: p.global_("copy_reg", "_reconstructor"),
                                lambda: p.tuple_([lambda: p.global_("__builtin__", "object"),
                                                  lambda: p.global_("__builtin__", "object"),
                                                  lambda: p.none()]))),
             (lambda: p.str_("w"), lambda: tensor_v2(p, w, 0, (1,), (1,)))])
    return legacy_file(p.stop(), [w])


FIXTURES = {
    "py2_state_dict": state_dict,
    "py2_rebuild_v1": rebuild_v1,
    "py2_storage_view": storage_view,
    "py2_text_ints": text_ints,
    "py2_non_utf8": non_utf8,
    "py2_copy_reg": copy_reg,
}

# Run in a child Python per file and mode: what torch.load returns, walked.
LOADER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from torch_manifest import walk, values_manifest
path, weights_only = sys.argv[2], sys.argv[3] == "1"
try:
    obj = torch.load(path, weights_only=weights_only, map_location="cpu")
except Exception as e:
    # The line that names the cause (weights_only errors put it after advice).
    lines = [l.strip() for l in str(e).splitlines() if l.strip()]
    cause = [l for l in lines if "Unsupported" in l or "codec" in l] or lines[:1]
    print(json.dumps({"error": "%s: %s" % (type(e).__name__, cause[0])}))
    sys.exit(0)
tensors = []
walk(obj, [], tensors, {})
def values(o):
    try:
        return values_manifest(o)
    except TypeError as e:
        return "not listable: %s" % e
print(json.dumps({"type": type(obj).__name__, "tensors": tensors, "values": values(obj)}))
"""


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, make in FIXTURES.items():
        path = os.path.join(OUT, name + ".pt")
        with open(path, "wb") as f:
            f.write(make())
        answer = {}
        for mode, flag in (("weights_only", "1"), ("full", "0")):
            r = subprocess.run([sys.executable, "-c", LOADER, HERE, path, flag],
                               check=True, capture_output=True, text=True)
            answer[mode] = json.loads(r.stdout.strip().splitlines()[-1])
        with open(os.path.join(OUT, name + ".torch.json"), "w") as f:
            json.dump(answer, f, indent=1, sort_keys=True)
            f.write("\n")
        print(name, {m: a.get("error", "ok") for m, a in answer.items()})


if __name__ == "__main__":
    main()
