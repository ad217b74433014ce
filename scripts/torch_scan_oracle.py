#!/usr/bin/env python3
"""What PyTorch says about the globals in each file, for `stowage scan`'s tests.

usage: torch_scan_oracle.py FILE...   (needs $TORCH_PY; exits 77 without torch)

Prints one JSON object, for each file:
  {"torch": [...] | null,      torch.serialization.get_unsafe_globals_in_checkpoint(FILE),
                               sorted; null where it raises (TorchScript, legacy,
                               a bare pickle, opcodes its static walk does not know)
   "torch_error": "..." | null,
   "torch_mapped": [...] | null, "torch" with each name mapped Python 2 -> 3 by
                               CPython's full _compat_pickle (PyTorch maps with a
                               shorter table of its own, so a protocol 2
                               `commands.Popen` stays so for it while CPython's
                               unpickler imports `subprocess.Popen`),
   "oracle": [...] | null,     the same set computed over every pickle of the file,
                               wherever it is (every zip member that CPython reads as
                               a pickle, *.pkl ones always, and the members of zips
                               inside it; the five legacy sections; the pickle of a
                               .npy object array; a bare file's pickles back to back,
                               to the first that is none): each pickle is run by CPython's own
                               pure-Python unpickler whose find_class only records
                               the name (mapped Python 2 -> 3 as CPython maps it)
                               and returns an inert stub, so nothing is imported or
                               called; then the names in torch's
                               _get_allowed_globals() (and its user-allowed ones) are
                               removed, as get_unsafe_globals_in_checkpoint does
   "oracle_error": "..." | null}
"""
import _compat_pickle
import io
import json
import pickle
import struct
import sys
import zipfile

try:
    import torch
    from torch import _weights_only_unpickler as wou
except Exception:
    sys.exit(77)

LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"


class Stub:
    """Anything: accepts every call, item, attribute set and state."""

    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return Stub()
    def __setstate__(self, state): pass
    def __setitem__(self, k, v): pass
    def append(self, v): pass
    def extend(self, v): pass
    def add(self, v): pass


class Tracer(pickle._Unpickler):
    def __init__(self, f, names):
        super().__init__(f, encoding="utf-8")
        self.names = names

    def find_class(self, module, name):
        if self.proto < 3 and self.fix_imports:
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
        self.names.add(f"{module}.{name}")
        return type(name, (Stub,), {})

    def persistent_load(self, pid):
        return Stub()


def load_all(data, names, must):
    """Runs the pickles of `data` back to back, to its end or the first that is
    no pickle; `must`: the first has to be one (else its error is raised).
    Names are kept only from pickles CPython read to their STOP."""
    f = io.BytesIO(data)
    first = True
    while f.tell() < len(data) or first:
        found = set()
        try:
            Tracer(f, found).load()
        except Exception:
            if first and must:
                raise
            return not first
        names |= found
        first = False
    return True


def member(data, z, info):
    """A member's bytes; for one flagged as encrypted (which zipfile refuses),
    its stored bytes when they are plain after all (their CRC-32 matches)."""
    if not info.flag_bits & 0x41:
        return z.read(info)
    import zlib
    at = info.header_offset
    n, m = struct.unpack_from("<HH", data, at + 26)
    raw = data[at + 30 + n + m:at + 30 + n + m + info.compress_size]
    if info.compress_type == zipfile.ZIP_DEFLATED:
        raw = zlib.decompress(raw, -15)
    if zlib.crc32(raw) != info.CRC:
        raise RuntimeError(f"{info.filename} is encrypted")
    return raw


def scan_bytes(name, data, names, must):
    """The pickles of one file or zip member, judged by content."""
    if data.startswith(b"PK\x03\x04"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            # By entry, not by name: a repeated name is read each time.
            for i in z.infolist():
                if not i.is_dir():
                    scan_bytes(i.filename, member(data, z, i), names, i.filename.endswith(".pkl"))
    elif data.startswith(LEGACY_MAGIC):
        f = io.BytesIO(data)
        for _ in range(5):
            Tracer(f, names).load()
    elif data.startswith(b"\x93NUMPY"):
        import numpy as np
        f = io.BytesIO(data)
        major, _ = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        dtype = read(f)[2]
        if dtype.hasobject:
            load_all(data[f.tell():], names, True)
    else:
        load_all(data, names, must)


def cpython_name(full):
    module, name = full.rsplit(".", 1)
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    return f"{module}.{name}"


def oracle(path):
    names = set()
    with open(path, "rb") as f:
        scan_bytes(path, f.read(), names, True)
    allowed = set(wou._get_allowed_globals()) | set(wou._get_user_allowed_globals())
    return sorted(names - allowed)


def main():
    out = {}
    for path in sys.argv[1:]:
        r = {"torch": None, "torch_error": None, "torch_mapped": None, "oracle": None,
             "oracle_error": None}
        try:
            r["torch"] = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(path))
            r["torch_mapped"] = sorted({cpython_name(n) for n in r["torch"]})
        except Exception as e:
            r["torch_error"] = f"{type(e).__name__}: {e}"
        try:
            r["oracle"] = oracle(path)
        except Exception as e:
            r["oracle_error"] = f"{type(e).__name__}: {e}"
        out[path] = r
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
