"""Writes packfiles and .idx v2 files by hand, so the tests can make the
damaged ones git itself never writes: lying deltas, cycles, offsets past
the end, 64-bit offsets in a small pack."""

import hashlib
import struct
import zlib

TYPES = {"commit": 1, "tree": 2, "blob": 3, "tag": 4, "ofs": 6, "ref": 7}


def object_id(kind, data):
    return hashlib.sha1(("%s %d\0" % (kind, len(data))).encode() + data).hexdigest()


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def delta(base_len, target_len, ops):
    """A delta: ops are ("copy", offset, size) or ("insert", bytes)."""
    out = bytearray(varint(base_len) + varint(target_len))
    for op in ops:
        if op[0] == "insert":
            out.append(len(op[1]))
            out += op[1]
            continue
        _, off, size = op
        cmd, args = 0x80, bytearray()
        for i in range(4):
            if off >> (8 * i) & 0xFF:
                cmd |= 1 << i
                args.append(off >> (8 * i) & 0xFF)
        for i in range(3):
            if size >> (8 * i) & 0xFF:
                cmd |= 16 << i
                args.append(size >> (8 * i) & 0xFF)
        out.append(cmd)
        out += args
    return bytes(out)


def entry_header(kind, size):
    t = TYPES[kind]
    first = (t << 4) | (size & 15)
    size >>= 4
    out = bytearray()
    while True:
        out.append(first | (0x80 if size else 0))
        if not size:
            return bytes(out)
        first = size & 0x7F
        size >>= 7


def ofs_encoding(rel):
    out = bytearray([rel & 0x7F])
    rel >>= 7
    while rel:
        rel -= 1
        out.insert(0, 0x80 | (rel & 0x7F))
        rel >>= 7
    return bytes(out)


def pack(entries):
    """entries: (id, kind, data, base) where kind is a type name, "ofs"
    (base: the index of an earlier entry) or "ref" (base: an id). Returns
    (pack bytes, [(id, offset)])."""
    out = bytearray(b"PACK" + struct.pack(">II", 2, len(entries)))
    offsets = []
    for oid, kind, data, base in entries:
        off = len(out)
        offsets.append((oid, off))
        out += entry_header(kind, len(data))
        if kind == "ofs":
            out += ofs_encoding(off - offsets[base][1])
        elif kind == "ref":
            out += bytes.fromhex(base)
        out += zlib.compress(data)
    out += hashlib.sha1(out).digest()
    return bytes(out), offsets


def index(offsets, pack_bytes, big=False):
    """An .idx v2 for offsets; big=True puts all offsets but the last in the
    64-bit table (git allows no more entries there than objects less one)."""
    ends = sorted(off for _, off in offsets)[1:] + [len(pack_bytes) - 20]
    ends = dict(zip(sorted(off for _, off in offsets), ends))
    rows = sorted((bytes.fromhex(oid), off) for oid, off in offsets)
    fan = [0] * 256
    for bid, _ in rows:
        fan[bid[0]] += 1
    for i in range(1, 256):
        fan[i] += fan[i - 1]
    out = bytearray(b"\377tOc" + struct.pack(">I", 2) + struct.pack(">256I", *fan))
    for bid, _ in rows:
        out += bid
    for _, off in rows:
        out += struct.pack(">I", zlib.crc32(pack_bytes[off:ends[off]]) & 0xFFFFFFFF)
    bigs = []
    for i, (_, off) in enumerate(rows):
        if big and i < len(rows) - 1:
            out += struct.pack(">I", 0x80000000 | len(bigs))
            bigs.append(off)
        else:
            out += struct.pack(">I", off)
    for off in bigs:
        out += struct.pack(">Q", off)
    out += pack_bytes[-20:]
    out += hashlib.sha1(out).digest()
    return bytes(out)
