#!/usr/bin/env python3
"""Regenerates crates/stowage/tests/fixtures/scan/field/: files built the way
the peers' scanner corpora build theirs (picklescan, modelscan, fickling),
each a case a scanner that assumes every zip is a torch save gets wrong, and
expected.json, what torch_scan_oracle.py (CPython's own unpickler, inert)
finds in each.

usage: make_scan_field_fixtures.py   (needs torch and numpy: run it with the
       python of scripts/torch-venv.sh)

Nothing here is ever unpickled for real: the payloads name os.system,
builtins.exec and subprocess.Popen, and are read back only by the oracle's
inert tracer.
"""
import argparse
import io
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

from make_scan_fixtures import record_answers  # noqa: E402

OUT = os.path.join(HERE, "..", "crates", "stowage", "tests", "fixtures", "scan", "field")


class Call:
    """Pickles as `func(*args)`: how a malicious file names a callable."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)


def evil(protocol=2):
    return pickle.dumps(Call(os.system, ("true",)), protocol=protocol)


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def zip_of(members, method=zipfile.ZIP_STORED):
    """A zip of `members` (name, bytes), dated 1980-01-01 so that the bytes
    are the same at every run."""
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", method) as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            z.writestr(info, data)
    return b.getvalue()


def saved(obj):
    b = io.BytesIO()
    torch.save(obj, b)
    return b.getvalue()


def set_flags(data, member, flags):
    """Sets the general-purpose flags of `member` in its local header and its
    central directory entry (a zip writer that marks plain data encrypted)."""
    data = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = z.getinfo(member)
        local = info.header_offset
        start = z.start_dir
    assert data[local:local + 4] == b"PK\x03\x04"
    struct.pack_into("<H", data, local + 6, flags)
    pos = start
    while data[pos:pos + 4] == b"PK\x01\x02":
        n, m, k = struct.unpack_from("<HHH", data, pos + 28)
        if data[pos + 46:pos + 46 + n].decode() == member:
            struct.pack_into("<H", data, pos + 8, flags)
        pos += 46 + n + m + k
    return bytes(data)


def main():
    argparse.ArgumentParser(description=__doc__).parse_args()
    os.makedirs(OUT, exist_ok=True)
    w = torch.arange(4, dtype=torch.float32)
    # 1. Zips not laid out like a torch save.
    write("root_pkl.zip", zip_of([("evil.pkl", evil())]))
    write("data_txt.zip", zip_of([("archive/data.pkl", pickle.dumps({}, protocol=2)),
                                  ("archive/data.txt", evil())]))
    write("model_bin.zip", zip_of([("model.bin",
                                    pickle.dumps(Call(subprocess.Popen, (["true"],)), protocol=0))],
                                  zipfile.ZIP_DEFLATED))
    b = io.BytesIO()
    np.savez(b, w=np.arange(3.0), x=np.array([Call(os.system, ("true",))], dtype=object))
    write("arrays.npz", b.getvalue())
    inner = zip_of([("inner.pt", saved({"w": w, "x": Call(os.system, ("true",))}))])
    write("nested.zip", zip_of([("readme.txt", b"weights inside\n"), ("outer.zip", inner)],
                               zipfile.ZIP_DEFLATED))
    # A torch save beside an extra member that torch.load never reads.
    write("torch_plus_member.pt",
          zip_of([(n, d) for n, d in zipfile_members(saved({"w": w}))]
                 + [("archive/extra/model.bin", evil(4))]))
    # 3. Flagged as encrypted, stored plainly (bit 0; bit 6, strong encryption).
    plain = saved({"w": w, "x": Call(os.system, ("true",))})
    write("flag_encrypted.pt", set_flags(plain, "archive/data.pkl", 0x1))
    write("flag_strong.pt", set_flags(plain, "archive/data.pkl", 0x40))
    # Truly encrypted: a ZipCrypto header and ciphertext, as `zip -e` writes
    # (bytes that are no pickle and cannot match the recorded CRC-32).
    locked = zip_of([("secret.pkl", evil())])
    with zipfile.ZipFile(io.BytesIO(locked)) as z:
        info = z.getinfo("secret.pkl")
        at = info.header_offset + 30 + len(info.filename)
    locked = bytearray(locked)
    locked[at:at + info.file_size] = bytes((b * 73 + 41) & 0xFF for b in locked[at:at + info.file_size])
    write("truly_encrypted.zip", set_flags(bytes(locked), "secret.pkl", 0x1))
    # 4. Pickles back to back: the payload in the sixth.
    write("six_pickles.pkl", b"".join(pickle.dumps(i, protocol=2) for i in range(5)) + evil())
    # 5. A frame that ends inside an opcode's argument: the bytes of a
    # STACK_GLOBAL of os.system sit in a byte string that runs past the frame.
    body = b"\x8c\x02os\x8c\x06system\x93\x8c\x04true\x85R."
    hidden = b"C" + bytes([len(body)]) + body + b"0N."
    write("frame_straddle.pkl", b"\x80\x04\x95" + struct.pack("<Q", 4) + hidden)
    # A protocol 0 call of builtins.exec cut before its STOP: CPython runs
    # exec, then fails at the end of the file.
    write("cut_exec.pkl", b"cbuiltins\nexec\n(Vprint(1)\ntR")
    # 6. .npy files: plain elements, and an object array (a pickle).
    b = io.BytesIO()
    np.save(b, np.arange(6, dtype=np.float32).reshape(2, 3))
    write("plain.npy", b.getvalue())
    b = io.BytesIO()
    np.save(b, np.array([Call(os.system, ("true",))], dtype=object), allow_pickle=True)
    write("object.npy", b.getvalue())
    # 7. A whole-model save: only imports (torch.nn classes), no code.
    torch.manual_seed(0)
    write("whole_model.pt", saved(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())))

    for n, r in record_answers(OUT).items():
        print(n, r["oracle"], r["oracle_error"])


def zipfile_members(data):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


if __name__ == "__main__":
    main()
