#!/usr/bin/env python3
"""Regenerates crates/stowage/tests/fixtures/scan/: files that name globals
outside PyTorch's weights_only allowlist, for `stowage scan`, and
expected.json, what torch_scan_oracle.py (real PyTorch) says about each.

usage: make_scan_fixtures.py   (needs $TORCH_PY: torch and numpy)

Nothing here is ever loaded with weights_only=False: the files are written by
torch.save / pickle and read back only by the oracle's inert tracer.
"""
import argparse
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from ckpt_zip import Pickle, build_zip  # noqa: E402

OUT = os.path.join(HERE, "..", "crates", "stowage", "tests", "fixtures", "scan")


class Call:
    """Pickles as `func(*args)`: how a malicious file names a callable."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)


class MyModel:  # pickled as __main__.MyModel
    def __init__(self):
        self.w = torch.ones(2)


def save(name, obj, **kw):
    torch.save(obj, os.path.join(OUT, name), **kw)


def archive(name, data_pkl):
    """A zip checkpoint holding only `data_pkl` (plus torch.save's small records)."""
    records = [("data.pkl", data_pkl), (".format_version", b"1"), (".storage_alignment", b"64"),
               ("byteorder", b"little"), ("version", b"3\n")]
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(build_zip(name.split(".")[0], records))


def main():
    argparse.ArgumentParser(description=__doc__).parse_args()
    os.makedirs(OUT, exist_ok=True)
    w = torch.arange(4, dtype=torch.float32)
    # Real torch.save output naming a callable that runs code.
    save("os_system.pt", {"w": w, "x": Call(os.system, ("true",))})        # posix.system
    save("builtins_eval.pt", {"w": w, "x": Call(eval, ("1+1",))})           # __builtin__.eval
    save("subprocess_popen.pt", {"w": w, "x": Call(subprocess.Popen, (["true"],))})
    save("main_class.pt", MyModel())                                         # __main__.MyModel
    # Whole-module save: torch.nn classes (unsafe: imported and constructed).
    torch.manual_seed(0)
    save("whole_model.pt", torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()))
    # numpy values and a Namespace: decoded by stowage, refused by weights_only.
    import argparse as ap
    save("numpy_values.pt", {"a": np.arange(4, dtype=np.float32), "s": np.float64(1.5),
                             "hp": ap.Namespace(lr=0.1)})
    # The legacy format, with a call in the object pickle.
    save("legacy_os_system.pt", {"w": w, "x": Call(os.system, ("true",))},
         _use_new_zipfile_serialization=False)
    # A bare pickle file (protocol 0 text opcodes).
    with open(os.path.join(OUT, "bare_protocol0.pkl"), "wb") as f:
        f.write(pickle.dumps(Call(os.system, ("true",)), protocol=0))
    # STACK_GLOBAL from memoized strings (protocol 4), as no pattern matcher
    # expects: 'builtins' and 'exec' memoized, dropped, fetched back later.
    p = Pickle(protocol=4)
    p.raw(b"\x8c\x08builtins\x94\x8c\x04exec\x9400")   # SHORT_BINUNICODE MEMOIZE ..., POP POP
    p.raw(b"h\x00h\x01\x93")                           # BINGET 0, BINGET 1, STACK_GLOBAL
    p.raw(b"\x8c\x04pass\x85R").stop()                 # ('pass',) REDUCE
    archive("stack_global_memo.pt", p.bytes())
    # Two records named data.pkl, the first calling os.system: PyTorch reads
    # the first (miniz), Python's zipfile the last; a scan reads both.
    benign = Pickle(protocol=2).empty_dict().stop().bytes()
    evil = pickle.dumps(Call(os.system, ("true",)), protocol=2)
    records = [("data.pkl", evil), ("data.pkl", benign), (".format_version", b"1"),
               ("byteorder", b"little"), ("version", b"3\n")]
    with open(os.path.join(OUT, "duplicate_data_pkl.pt"), "wb") as f:
        f.write(build_zip("duplicate_data_pkl", records))
    # Two torch.save outputs back to back (a .distcp holds one per item).
    a, b = io.BytesIO(), io.BytesIO()
    torch.save({"w": w}, a)
    torch.save({"x": Call(os.system, ("true",))}, b)
    with open(os.path.join(OUT, "back_to_back.distcp"), "wb") as f:
        f.write(a.getvalue() + b.getvalue())
    # A TorchScript archive (constants.pkl, data.pkl).
    m = torch.jit.script(torch.nn.Linear(2, 2))
    torch.jit.save(m, os.path.join(OUT, "torchscript.pt"))

    for n, r in record_answers(OUT).items():
        print(n, r["torch"], r["oracle"], r["oracle_error"])


def record_answers(out):
    """Runs torch_scan_oracle.py (in a process of its own) on every file of
    `out` and writes its answers to `out`/expected.json; returns them."""
    names = sorted(n for n in os.listdir(out)
                   if n not in ("expected.json", "README.md") and os.path.isfile(os.path.join(out, n)))
    r = subprocess.run([sys.executable, os.path.join(HERE, "torch_scan_oracle.py")]
                       + [os.path.join(out, n) for n in names],
                       check=True, capture_output=True, text=True)
    answers = {os.path.basename(k): v for k, v in json.loads(r.stdout).items()}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(answers, f, indent=1, sort_keys=True)
        f.write("\n")
    return answers


if __name__ == "__main__":
    main()
