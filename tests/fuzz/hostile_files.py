"""Builders of hostile files: zip bombs, XML entity attacks, deep nesting, PDF and image bombs.

Everything is built from bytes in a fraction of a second: a deflate stream of 2 GiB of zeros is
one 1 MiB block, fully flushed, repeated (a full flush resets the compressor, so the block
compresses the same every time); its CRC is the known CRC-32 of 2**31 zero bytes.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from fuzz_helpers import read_members, seed

MIB = 1 << 20
GIB_2 = 1 << 31
CRC32_OF_2_GIB_OF_ZEROS = 0x4DBDF21C  # zlib.crc32(bytes(2**31)), 2.3 s to compute


def deflate_zeros(size: int = GIB_2) -> bytes:
    """A raw deflate stream of ``size`` zero bytes (a multiple of 1 MiB), about size / 1000 long."""
    assert size % MIB == 0
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(bytes(MIB)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return block * (size // MIB) + compressor.flush()


def zlib_zeros(size: int = GIB_2) -> bytes:
    """The same stream with the zlib header and Adler-32 trailer (a PDF FlateDecode stream)."""
    adler = ((size % 65521) << 16) | 1  # Adler-32 of zeros: a stays 1, b adds 1 per byte
    return b"\x78\xda" + deflate_zeros(size) + struct.pack(">I", adler)


@dataclass
class Member:
    name: str
    data: bytes          # compressed (method 8) or stored (method 0)
    crc: int
    size: int            # the real uncompressed size
    method: int = 8
    declared: int | None = None  # the uncompressed size written in the headers, if not the real one
    offset: int | None = None    # point the directory at another member's local header


def deflated(name: str, content: bytes) -> Member:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    return Member(name, compressor.compress(content) + compressor.flush(), zlib.crc32(content), len(content))


def stored(name: str, content: bytes) -> Member:
    return Member(name, content, zlib.crc32(content), len(content), method=0)


def raw_zip(members: list[Member], declared_count: int | None = None) -> bytes:
    """A zip written field by field (zipfile cannot write lying sizes or shared data)."""
    out = bytearray()
    directory = bytearray()
    offsets: list[int] = []
    for member in members:
        name = member.name.encode()
        size = member.size if member.declared is None else member.declared
        if member.offset is None:
            offsets.append(len(out))
            out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, member.method, 0, 0x21, member.crc,
                               len(member.data), size, len(name), 0) + name + member.data
        else:
            offsets.append(member.offset)
    for member, offset in zip(members, offsets, strict=True):
        name = member.name.encode()
        size = member.size if member.declared is None else member.declared
        directory += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, member.method, 0, 0x21,
                                 member.crc, len(member.data), size, len(name), 0, 0, 0, 0, 0, offset) + name
    count = len(members) if declared_count is None else declared_count
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, min(count, 0xFFFF), min(count, 0xFFFF),
                      len(directory), len(out), 0)
    return bytes(out + directory + end)


def office_with(seed_name: str, replace: dict[str, Member | bytes], extra: list[Member] | None = None) -> bytes:
    """A real Office file with some members replaced (bytes are deflated) and others added."""
    members = []
    for name, content in read_members(seed(seed_name)):
        new = replace.get(name, content)
        members.append(deflated(name, new) if isinstance(new, bytes) else new)
    return raw_zip(members + (extra or []))


def office_member(seed_name: str, name: str) -> bytes:
    return dict(read_members(seed(seed_name)))[name]


# -- XML -------------------------------------------------------------------------------------------

LAUGHS = (b'<!DOCTYPE lolz [<!ENTITY lol "lol">'
          + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
                     for i in range(1, 10))
          + b"]>")


def with_doctype(xml: bytes, doctype: bytes, reference: bytes, anchor: bytes) -> bytes:
    """``xml`` with ``doctype`` after its declaration and ``reference`` right after ``anchor``."""
    declaration_end = xml.index(b"?>") + 2 if xml.startswith(b"<?xml") else 0
    xml = xml[:declaration_end] + doctype + xml[declaration_end:]
    at = xml.index(anchor) + len(anchor)
    return xml[:at] + reference + xml[at:]


def xxe(path: str) -> bytes:
    return b'<!DOCTYPE x [<!ENTITY xxe SYSTEM "file://' + path.encode() + b'">]>'


# -- PDF -----------------------------------------------------------------------------------------------


def pdf(objects: dict[int, bytes], root: int = 1) -> bytes:
    """A PDF with these numbered objects and a correct cross-reference table."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += b"%d 0 obj\n" % number + objects[number] + b"\nendobj\n"
    size = max(objects) + 1
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for number in range(1, size):
        out += b"%010d 00000 n \n" % offsets[number] if number in offsets else b"0000000000 65535 f \n"
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, root, xref)
    return bytes(out)


def stream(content: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s >>\nstream\n" % (len(content), extra) + content + b"\nendstream"


FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
PAGE_TEXT = stream(b"BT /F1 12 Tf 72 720 Td (hostile) Tj ET")


def pdf_pages(kids: int, count: int, loop: bool = False) -> bytes:
    """A page tree with ``kids`` pages sharing one content stream and a /Count of ``count``."""
    first = 10
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        3: FONT,
        4: PAGE_TEXT,
    }
    refs = b" ".join(b"%d 0 R" % (first + i) for i in range(kids))
    if loop:
        refs += b" 2 0 R"  # the tree contains itself
    objects[2] = b"<< /Type /Pages /Kids [" + refs + b"] /Count %d >>" % count
    for i in range(kids):
        objects[first + i] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                              b"/Resources << /Font << /F1 3 0 R >> >> >>")
    return pdf(objects)


def pdf_one_page(content: bytes, resources: bytes = b"<< /Font << /F1 3 0 R >> >>",
                 more: dict[int, bytes] | None = None) -> bytes:
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
        3: FONT,
        4: content,
        5: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources " + resources + b" >>",
    }
    objects.update(more or {})
    return pdf(objects)


# -- images ----------------------------------------------------------------------------------------


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` pixels, with one tiny data chunk."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(b"\x00" * 64))
            + _png_chunk(b"IEND", b""))


def jpeg_header_only(width: int, height: int) -> bytes:
    """A baseline JPEG start (SOI, a quantisation table, SOF0) claiming the size, then EOI."""
    dqt = b"\xff\xdb" + struct.pack(">H", 67) + b"\x00" + bytes(range(1, 65))
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + dqt + sof + b"\xff\xd9"
