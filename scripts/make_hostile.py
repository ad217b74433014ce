#!/usr/bin/env python3
"""Regenerate the malformed and malicious checkpoints in crates/stowage/tests/fixtures/hostile/.

usage: make_hostile.py [--out DIR]
Standard library only (no torch); deterministic: the same bytes on every run.

Each file is named after its one defect. The zip ones are laid out exactly as
torch.save lays out a file (ckpt_zip.build_zip), so the defect is the only thing
wrong; pickles that the `pickle` module cannot be made to write are emitted
opcode by opcode (ckpt_zip.Pickle). Two are cut from real fixtures in the
parent directory (simple.pt, legacy_format.pt), which must be there.

What a correct loader must do with each, and what torch.load(weights_only=True)
says about it, is in hostile/README.md (scripts/torch_hostile_report.py
re-checks the torch side).
"""
import argparse
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, HERE)

from ckpt_zip import DEFLATED, Pickle, Record, build_zip, read_records  # noqa: E402

FIXTURES = os.path.join(HERE, "..", "crates", "stowage", "tests", "fixtures")
DEFAULT_OUT = os.path.join(FIXTURES, "hostile")

HOSTILE = {}


def hostile(fn):
    """Register a maker: fn(name) returns the file's bytes."""
    HOSTILE[fn.__name__.removeprefix("make_")] = fn
    return fn


# --------------------------------------------------------------------------- helpers

def checkpoint(archive, data_pkl, storages=(), extra_records=()):
    """A zip checkpoint as torch.save 2.x writes it: data.pkl, .format_version,
    .storage_alignment, byteorder, data/<key> (Record or bytes), version."""
    records = [("data.pkl", data_pkl), (".format_version", b"1"), (".storage_alignment", b"64"),
               ("byteorder", b"little")]
    for key, data in storages:
        records.append(data if isinstance(data, Record) else (f"data/{key}", data))
    records += list(extra_records)
    records.append(("version", b"3\n"))
    return build_zip(archive, records)


def floats(values):
    return struct.pack(f"<{len(values)}f", *values)


def one_tensor_pickle(numel, offset, size, stride, storage_class="FloatStorage", key="0"):
    """{'weight': _rebuild_tensor_v2(<storage key, numel>, offset, size, stride)}"""
    p = Pickle().empty_dict().str_("weight")
    p.tensor_v2(storage_class, key, numel, offset, size, stride)
    return p.setitem().stop().bytes()


def payload_pickle(build_payload):
    """{'weight': <a valid 2x2 float tensor>, 'payload': <whatever build_payload emits>}:
    the hostile part comes after a tensor, as it would in a tampered real checkpoint."""
    p = Pickle().empty_dict().mark()
    p.str_("weight").tensor_v2("FloatStorage", "0", 4, 0, (2, 2), (2, 1))
    p.str_("payload")
    build_payload(p)
    return p.setitems().stop().bytes()


WEIGHT_2X2 = floats([1.0, 2.0, 3.0, 4.0])


def real(name):
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read()


# --------------------------------------------------------------------------- containers

@hostile
def make_empty(name):
    """A zero-byte file."""
    return b""


@hostile
def make_not_a_checkpoint(name):
    """Plain text: neither a zip (PK\\x03\\x04) nor a legacy pickle stream."""
    return b"This is not a PyTorch checkpoint.\nJust some text that ends up with a .pt name.\n"


@hostile
def make_truncated(name):
    """simple.pt cut in half: the central directory and end records are gone."""
    data = real("simple.pt")
    return data[: len(data) // 2]


@hostile
def make_legacy_truncated(name):
    """legacy_format.pt cut in half: the main pickle ends without STOP, no storage blobs."""
    data = real("legacy_format.pt")
    return data[: len(data) // 2]


@hostile
def make_missing_record(name):
    """simple.pt without its data/0 record, which data.pkl still references."""
    _, records = read_records(os.path.join(FIXTURES, "simple.pt"))
    return build_zip(name, [(n, d) for n, d in records if n != "data/0"])


@hostile
def make_short_record(name):
    """simple.pt with data/0 holding 20 bytes where the pickle declares 12 float32s (48 bytes)."""
    _, records = read_records(os.path.join(FIXTURES, "simple.pt"))
    return build_zip(name, [(n, d[:20] if n == "data/0" else d) for n, d in records])


@hostile
def make_bad_byteorder(name):
    """The byteorder record says 'middle' (only 'little' and 'big' exist)."""
    pkl = one_tensor_pickle(4, 0, (2, 2), (2, 1))
    recs = [("data.pkl", pkl), ("byteorder", b"middle"), ("data/0", WEIGHT_2X2), ("version", b"3\n")]
    return build_zip(name, recs)


# --------------------------------------------------------------------------- tensor geometry

@hostile
def make_view_past_end(name):
    """A [2,3] view at offset 4 (stride [3,1]) of a 6-element storage: it needs elements 4..9."""
    return checkpoint(name, one_tensor_pickle(6, 4, (2, 3), (3, 1)), [("0", floats(range(6)))])


@hostile
def make_view_stride_overflow(name):
    """size [3], stride [2**62]: the last element's index, 2**63, overflows i64."""
    return checkpoint(name, one_tensor_pickle(4, 0, (3,), (2**62,)), [("0", floats(range(4)))])


@hostile
def make_view_negative_size(name):
    """size [-2, 3]: a negative dimension."""
    return checkpoint(name, one_tensor_pickle(6, 0, (-2, 3), (3, 1)), [("0", floats(range(6)))])


@hostile
def make_absurd_numel(name):
    """The storage's persistent id declares 2**62 float32 elements (2**64 bytes, which
    overflows u64); the record holds 48 bytes. Nothing may be allocated from the claim."""
    return checkpoint(name, one_tensor_pickle(2**62, 0, (3, 4), (4, 1)), [("0", floats(range(12)))])


# --------------------------------------------------------------------------- decompression

@hostile
def make_deflate_bomb(name):
    """data/0 is a deflated record whose directory entries declare 48 bytes (what the
    pickle expects) but whose stream inflates to 100 MiB of zeros."""
    bomb = bytes(100 * 2**20)
    rec = Record("data/0", bomb, method=DEFLATED, usize=48)
    return checkpoint(name, one_tensor_pickle(12, 0, (3, 4), (4, 1)), [("0", rec)])


@hostile
def make_deflate_bomb_huge_size(name):
    """data/0 is a deflated record whose zip64 directory entry declares 2**40 bytes (1 TiB),
    matching a pickle that claims 2**38 float32s; the stream itself inflates to 1 MiB.
    A loader that allocates what the header declares asks for a terabyte."""
    rec = Record("data/0", bytes(2**20), method=DEFLATED, usize=2**40)
    return checkpoint(name, one_tensor_pickle(2**38, 0, (2**19, 2**19), (2**19, 1)), [("0", rec)])


# --------------------------------------------------------------------------- pickle: code execution

@hostile
def make_os_system(name):
    """data.pkl calls os.system('echo pwned') through GLOBAL 'os system' + REDUCE."""
    pkl = payload_pickle(lambda p: p.global_("os", "system").str_("echo pwned").tuple1().reduce())
    return checkpoint(name, pkl, [("0", WEIGHT_2X2)])


@hostile
def make_builtins_eval(name):
    """data.pkl calls builtins.eval on a string that would run `echo pwned`."""
    code = "__import__('os').system('echo pwned')"
    pkl = payload_pickle(lambda p: p.global_("builtins", "eval").str_(code).tuple1().reduce())
    return checkpoint(name, pkl, [("0", WEIGHT_2X2)])


@hostile
def make_custom_class(name):
    """data.pkl instantiates `__main__.MyModule` (GLOBAL + EMPTY_TUPLE + NEWOBJ + BUILD),
    as pickling a whole nn.Module from a script would."""
    pkl = payload_pickle(lambda p: p.global_("__main__", "MyModule").empty_tuple().newobj()
                         .empty_dict().str_("training").true().setitem().build())
    return checkpoint(name, pkl, [("0", WEIGHT_2X2)])


# --------------------------------------------------------------------------- pickle: resources

@hostile
def make_deep_nesting(name):
    """data.pkl is a list nested 100,000 deep, built as torch's own pickles build
    lists: EMPTY_LIST MARK, 100,000 times, then the innermost EMPTY_LIST and 100,000
    APPENDS (so 100,000 open MARKs at the deepest point; 300 KB on disk). Building,
    walking and dropping it must not recurse on the native stack."""
    depth = 100_000
    pkl = Pickle().raw(b"](" * depth + b"]" + b"e" * depth).stop().bytes()
    return checkpoint(name, pkl)


@hostile
def make_memo_doubling(name):
    """data.pkl builds x = 'x', then [x, x], then [[x, x], [x, x]], ... 60 times
    (EMPTY_LIST MARK BINGET i BINGET i APPENDS BINPUT i+1): under 1 KB of pickle,
    but 2**60 leaves if expanded instead of shared. No tensors."""
    p = Pickle().str_("x").put(0)
    for i in range(60):
        p.empty_list().mark().get(i).get(i).appends().put(i + 1)
    return checkpoint(name, p.stop().bytes())


@hostile
def make_bad_opcode(name):
    """data.pkl has an undefined opcode byte (0xff) after a valid start."""
    pkl = Pickle().empty_dict().str_("weight").raw(b"\xff").setitem().stop().bytes()
    return checkpoint(name, pkl)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, make in HOSTILE.items():
        data = make(name)
        with open(os.path.join(args.out, name + ".pt"), "wb") as f:
            f.write(data)
        print(f"{name}.pt  {len(data)} bytes")


if __name__ == "__main__":
    main()
