"""Byte-level helpers for building checkpoint files by hand (standard library only).

Used by make_fixtures.py (to rewrite files that PyTorch wrote) and by
make_hostile.py (to build defective files). Two parts:

* `read_records` / `build_zip`: the zip container as PyTorch's writer lays it
  out (every record stored, a local "FB" extra field padding each payload to a
  64-byte boundary, bit-3 data descriptors, zeroed DOS dates, zip64 end records).
  Rewriting a torch file's records unchanged with `build_zip` gives back the
  same bytes, which is what makes the rewritten fixtures credible.
* `Pickle`: an emitter of protocol-2 pickle opcodes, for pickles that the
  `pickle` module cannot be made to write (hostile globals, lies about sizes,
  deep nesting, memo tricks).
"""
import struct
import zipfile
import zlib

STORED, DEFLATED = 0, 8
_FLAGS = 0x0808  # bit 3: sizes in a data descriptor; bit 11: UTF-8 names
_U32 = 0xFFFFFFFF


def read_records(path):
    """(archive_name, [(record_name, bytes), ...]) of a zip checkpoint, in file order."""
    with zipfile.ZipFile(path) as z:
        infos = sorted(z.infolist(), key=lambda i: i.header_offset)
        archive = infos[0].filename.split("/", 1)[0]
        return archive, [(i.filename.split("/", 1)[1], z.read(i)) for i in infos]


class Record:
    """One zip entry. `payload` is written as is; the sizes and CRC written into the
    directory default to the true ones and can be overridden to lie."""

    def __init__(self, name, data, method=STORED, payload=None, usize=None, csize=None, crc=None):
        self.name = name
        self.data = data
        self.method = method
        if payload is None:
            if method == DEFLATED:
                c = zlib.compressobj(9, zlib.DEFLATED, -15)
                payload = c.compress(data) + c.flush()
            else:
                payload = data
        self.payload = payload
        self.usize = len(data) if usize is None else usize
        self.csize = len(payload) if csize is None else csize
        self.crc = zlib.crc32(data) if crc is None else crc


def build_zip(archive, records, alignment=64):
    """The bytes of a zip archive holding `records` ((name, bytes) pairs or
    Record objects) under the top folder `archive`, laid out as PyTorch's writer does."""
    out = bytearray()
    central = bytearray()
    n = 0
    for rec in records:
        if not isinstance(rec, Record):
            rec = Record(*rec)
        name = f"{archive}/{rec.name}".encode()
        offset = len(out)
        big = rec.usize >= _U32 or rec.csize >= _U32
        # local header: sizes live in the data descriptor; zip64 extra (zeroed) first, then FB padding
        local_z64 = struct.pack("<HHQQ", 1, 16, 0, 0) if big else b""
        start = offset + 30 + len(name) + len(local_z64) + 4
        pad = (alignment - start % alignment) % alignment
        extra = local_z64 + b"FB" + struct.pack("<H", pad) + b"Z" * pad
        # an empty record gets no data descriptor (and no bit 3), as miniz writes it
        flags = _FLAGS if rec.payload else _FLAGS & ~0x8
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45 if big else 0, flags, rec.method,
                           0, 0, 0, 0, 0, len(name), len(extra))
        out += name + extra + rec.payload
        if not rec.payload:
            cextra = b""
            cs, us = rec.csize, rec.usize
        elif big:
            out += struct.pack("<IIQQ", 0x08074B50, rec.crc, rec.csize, rec.usize)
            cextra = struct.pack("<HHQQ", 1, 16, rec.usize, rec.csize)
            cs, us = _U32, _U32
        else:
            out += struct.pack("<IIII", 0x08074B50, rec.crc, rec.csize, rec.usize)
            cextra = b""
            cs, us = rec.csize, rec.usize
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0, 45 if big else 0, flags,
                               rec.method, 0, 0, rec.crc, cs, us, len(name), len(cextra),
                               0, 0, 0, 0, offset)
        central += name + cextra
        n += 1
    cd_offset = len(out)
    out += central
    z64_offset = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 0x2D, 0, 0, n, n, len(central), cd_offset)
    out += struct.pack("<IIQI", 0x07064B50, 0, z64_offset, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(central), cd_offset, 0)
    return bytes(out)


class Pickle:
    """Writes pickle opcodes one call at a time; `bytes()` gives the stream.

    Only what the hand-made files need: the protocol-2 opcodes that torch.save
    itself emits, plus a few that the weights-only loader refuses."""

    def __init__(self, protocol=2):
        self.b = bytearray(b"\x80" + bytes([protocol]))

    def raw(self, data):
        self.b += data
        return self

    def op(self, code):
        self.b += code
        return self

    def mark(self): return self.op(b"(")
    def stop(self): return self.op(b".")
    def none(self): return self.op(b"N")
    def true(self): return self.op(b"\x88")
    def false(self): return self.op(b"\x89")
    def empty_dict(self): return self.op(b"}")
    def empty_list(self): return self.op(b"]")
    def empty_tuple(self): return self.op(b")")
    def tuple(self): return self.op(b"t")       # MARK ... TUPLE
    def list(self): return self.op(b"l")        # MARK ... LIST
    def tuple1(self): return self.op(b"\x85")
    def tuple2(self): return self.op(b"\x86")
    def tuple3(self): return self.op(b"\x87")
    def setitem(self): return self.op(b"s")
    def setitems(self): return self.op(b"u")    # MARK k v k v ... SETITEMS
    def append(self): return self.op(b"a")
    def appends(self): return self.op(b"e")
    def reduce(self): return self.op(b"R")
    def build(self): return self.op(b"b")
    def newobj(self): return self.op(b"\x81")
    def binpersid(self): return self.op(b"Q")

    def global_(self, module, name):
        return self.op(b"c" + module.encode() + b"\n" + name.encode() + b"\n")

    def str_(self, s):
        data = s.encode("utf-8")
        return self.op(b"X" + struct.pack("<I", len(data)) + data)

    def int_(self, v):
        if 0 <= v < 256:
            return self.op(b"K" + bytes([v]))
        if 0 <= v < 65536:
            return self.op(b"M" + struct.pack("<H", v))
        if -2**31 <= v < 2**31:
            return self.op(b"J" + struct.pack("<i", v))
        n = (v.bit_length() + 8) // 8  # LONG1: little-endian two's complement
        return self.op(b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True))

    def put(self, i):
        return self.op(b"q" + bytes([i])) if i < 256 else self.op(b"r" + struct.pack("<I", i))

    def get(self, i):
        return self.op(b"h" + bytes([i])) if i < 256 else self.op(b"j" + struct.pack("<I", i))

    def ints_tuple(self, values):
        """A tuple of ints, with TUPLE1/2/3 where torch's pickler uses them."""
        if not values:
            return self.empty_tuple()
        if len(values) > 3:
            self.mark()
        for v in values:
            self.int_(v)
        return self.op({1: b"\x85", 2: b"\x86", 3: b"\x87"}.get(len(values), b"t"))

    def tensor_v2(self, storage_class, key, numel, offset, size, stride, requires_grad=False):
        """`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, OrderedDict())`
        with the storage given by a persistent id, as torch.save writes it."""
        self.global_("torch._utils", "_rebuild_tensor_v2")
        self.mark()
        self.mark().str_("storage").global_("torch", storage_class).str_(key).str_("cpu").int_(numel).tuple()
        self.binpersid()
        self.int_(offset).ints_tuple(size).ints_tuple(stride)
        self.true() if requires_grad else self.false()
        self.global_("collections", "OrderedDict").empty_tuple().reduce()
        return self.tuple().reduce()

    def bytes(self):
        return bytes(self.b)
