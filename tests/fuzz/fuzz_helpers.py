"""Shared pieces of the fuzz suite (imported by name: tests/fuzz is on sys.path).

* ``fuzz(ci_examples)``: the Hypothesis settings of a target (see conftest.py for the profiles);
* ``mutated_bytes(seed)``: byte flips, truncation, deletion, duplication, splices from the other
  seed files and inserted junk or format tokens, at offsets biased towards both ends of the file
  (headers, cross-reference tables, zip central directories);
* ``mutated_zip(seed)``: an Office Open XML file with one of its XML members mutated (bytes or
  XML-aware edits) and re-zipped, or with members dropped, duplicated or renamed;
* ``check_contract(call)``: the loader contract: documents, or an ``MxRagError`` with a one-line
  message; anything else propagates and fails the example.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from mx_rag.errors import MxRagError

DOCS = Path(__file__).resolve().parent.parent / "data" / "docs"
MAX_MESSAGE = 2000  # an error message is a line, not a dump of the input

_SEEDS: dict[str, bytes] = {}


@dataclass
class HostileRun:
    """The background ``hostile_runner.py`` run (conftest.py starts it; test_hostile_inputs reads it)."""

    process: subprocess.Popen[bytes]
    directory: Path


HOSTILE_RUN = pytest.StashKey[HostileRun]()


def seed(name: str) -> bytes:
    if name not in _SEEDS:
        _SEEDS[name] = (DOCS / name).read_bytes()
    return _SEEDS[name]


def all_seed_names() -> list[str]:
    return sorted(p.name for p in DOCS.iterdir() if p.is_file() and p.name != "NOTICE")


def fuzz(ci_examples: int) -> settings:
    """``ci_examples`` examples in CI; ``MXRAG_FUZZ_EXAMPLES`` of them in a long run."""
    if os.environ.get("MXRAG_FUZZ_EXAMPLES"):
        return settings.get_profile("mxrag-fuzz-long")
    return settings(settings.get_profile("mxrag-fuzz-ci"), max_examples=ci_examples)


# -- the contract -------------------------------------------------------------------------------


def check_message(exc: BaseException) -> str:
    message = str(exc)
    assert message.strip(), f"{type(exc).__name__} with an empty message"
    assert "\n" not in message and "\r" not in message, f"{type(exc).__name__} message is not one line: {message!r}"
    assert len(message) <= MAX_MESSAGE, f"{type(exc).__name__} message of {len(message)} characters"
    return message


def check_contract(call: Callable[[], Any]) -> list[Document] | MxRagError:
    """Run a load; documents are returned, our errors are returned after checking the message.

    Our error caused by ``RecursionError`` or ``MemoryError`` fails too: it was caught, but the
    input was not refused before it exhausted the stack or the memory.
    """
    try:
        result = call()
    except MxRagError as exc:
        check_message(exc)
        cause = exc.__cause__
        assert not isinstance(cause, (RecursionError, MemoryError)), f"{type(exc).__name__} from {cause!r}"
        event(f"raised {type(exc).__name__}" + (f" from {type(cause).__name__}" if cause is not None else ""))
        return exc
    event("documents" if result else "no documents")
    assert isinstance(result, list), type(result)
    for doc in result:
        assert isinstance(doc, Document), type(doc)
        assert isinstance(doc.page_content, str)
        assert doc.metadata.get("type") in ("text", "image"), doc.metadata
    return result


# -- byte-level mutations -----------------------------------------------------------------------

TOKENS = [
    # PDF
    b"obj", b"endobj", b"stream\n", b"endstream", b"<<", b">>", b"[", b"]", b"/Count 999999999",
    b"/Count -1", b"/Kids [1 0 R]", b"/Length 999999999", b"/Filter /FlateDecode", b"xref", b"trailer",
    b"startxref\n0\n%%EOF", b"%%EOF", b"1 0 R", b"0 0 R", b"/Parent 1 0 R", b"/Resources 1 0 R",
    b"/Encrypt", b"BT /F1 12 Tf (x) Tj ET", b"q", b"Q", b"(", b")", b"\\",
    # images
    b"\xff\xd8\xff\xe0", b"\xff\xd9", b"\x89PNG\r\n\x1a\n", b"IHDR", b"IDAT", b"IEND",
    b"\x00\x00\xff\xff", b"\xff\xff\xff\xff",
    # markup and text
    b"<", b">", b"</", b"<table><tr><td>", b"</td></tr></table>", b"<pre>", b"<script>", b"<!--",
    b"<![CDATA[", b"]]>", b"&#x10FFFF;", b"&#99999999;", b"&lol;", b"<!DOCTYPE x [<!ENTITY a 'b'>]>",
    b"```", b"![a](", b"](../../etc/passwd)", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\x00",
    b"\xc3\x28", b"\xed\xa0\x80", b"PK\x03\x04", b"PK\x05\x06",
]

_OFFSET = st.one_of(
    st.integers(0, 2**31),      # anywhere
    st.integers(0, 1024),       # near the start (magic numbers, headers)
    st.integers(-2048, -1),     # near the end (xref, trailer, zip central directory)
)


def _at(offset: int, size: int) -> int:
    return (size + offset) % (size + 1) if offset < 0 else offset % (size + 1)


_OP = st.one_of(
    st.tuples(st.just("flip"), _OFFSET, st.integers(1, 255)),
    st.tuples(st.just("set"), _OFFSET, st.sampled_from([0x00, 0xFF, 0x7F, 0x80, 0x30, 0x39, 0x0A, 0x20])),
    st.tuples(st.just("truncate"), _OFFSET),
    st.tuples(st.just("delete"), _OFFSET, st.integers(1, 4096)),
    st.tuples(st.just("duplicate"), _OFFSET, st.integers(1, 4096), _OFFSET),
    st.tuples(st.just("junk"), _OFFSET, st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("token"), _OFFSET, st.sampled_from(TOKENS)),
    st.tuples(st.just("splice"), _OFFSET, st.sampled_from(all_seed_names()), _OFFSET, st.integers(1, 8192)),
)


def apply_ops(data: bytes, ops: list[tuple[Any, ...]]) -> bytes:
    buf = bytearray(data)
    for op in ops:
        kind = op[0]
        at = _at(op[1], len(buf))
        if kind == "flip" and buf:
            buf[min(at, len(buf) - 1)] ^= op[2]
        elif kind == "set" and buf:
            buf[min(at, len(buf) - 1)] = op[2]
        elif kind == "truncate":
            del buf[at:]
        elif kind == "delete":
            del buf[at : at + op[2]]
        elif kind == "duplicate":
            chunk = bytes(buf[at : at + op[2]])
            where = _at(op[3], len(buf))
            buf[where:where] = chunk
        elif kind in ("junk", "token"):
            buf[at:at] = op[2]
        elif kind == "splice":
            other = seed(op[2])
            start = _at(op[3], len(other))
            buf[at:at] = other[start : start + op[4]]
    return bytes(buf)


@dataclass(frozen=True)
class Mutant:
    """A mutated file; its repr (what a failing example prints) is the recipe, not the bytes."""

    content: bytes
    recipe: str

    def __repr__(self) -> str:
        return f"<{len(self.content)} bytes: {self.recipe}>"


def mutated_bytes(name: str, max_ops: int = 4) -> st.SearchStrategy[Mutant]:
    """A seed file of tests/data/docs with byte-level mutations."""
    return st.lists(_OP, min_size=1, max_size=max_ops).map(
        lambda ops: Mutant(apply_ops(seed(name), ops), f"{name} with {ops}")
    )


# -- zip (Office Open XML) mutations --------------------------------------------------------------

XML_SNIPPETS = [
    # WordprocessingML
    b"<w:p><w:r><w:t>fuzz</w:t></w:r></w:p>", b"<w:tbl><w:tr><w:tc><w:p/></w:tc></w:tr></w:tbl>",
    b"<w:tbl>", b"</w:tbl>", b"<w:tr>", b"<w:tc/>", b'<w:gridSpan w:val="99999"/>', b'<w:vMerge w:val="restart"/>',
    b"<w:sdt><w:sdtContent><w:p/></w:sdtContent></w:sdt>", b'<a:blip r:embed="rId999"/>',
    # PresentationML / DrawingML
    b"<p:grpSp><p:nvGrpSpPr/><p:grpSpPr/></p:grpSp>", b"<a:tbl><a:tr><a:tc/></a:tr></a:tbl>",
    b'<p:sldId id="999999" r:id="rId999"/>', b"<p:pic/>",
    # SpreadsheetML
    b'<c r="A1" t="s"><v>999999</v></c>', b'<c r="XFD1048576"><v>1</v></c>', b'<c r="A1" t="n"><v>x</v></c>',
    b'<c r="ZZZZZ1"><v>1</v></c>', b'<row r="1048576"><c r="A1048576"><v>1</v></c></row>',
    b'<mergeCell ref="A1:XFD1048576"/>', b'<mergeCell ref="B2:A1"/>', b'<mergeCell ref="nonsense"/>',
    b'<c r="A2" t="d"><v>not-a-date</v></c>', b'<c r="A3" s="99999"><v>1</v></c>',
    b'<dimension ref="A1:XFD1048576"/>', b'<sheet name="x" sheetId="9" r:id="rId999"/>',
    # XML itself
    b"<!DOCTYPE x [<!ENTITY a 'aaaaaaaaaa'><!ENTITY b '&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;'>]>", b"&b;", b"&#0;",
    b"<![CDATA[x]]>", b"<?xml version='1.0'?>", b"</>", b"<x:y xmlns:x=''/>", b"\x00",
]

_ATTR_VALUE = re.compile(rb'="(-?\d+)"')
_TAG = re.compile(rb"<[A-Za-z][^<>]{0,200}>")

_XML_OP = st.one_of(
    st.tuples(st.just("snippet"), _OFFSET, st.sampled_from(XML_SNIPPETS)),
    st.tuples(st.just("number"), st.integers(0, 2**31),
              st.sampled_from([b"-1", b"0", b"99999999999", b"abc", b"", b"1e9", b"16385", b"1048577"])),
    st.tuples(st.just("drop_tag"), st.integers(0, 2**31)),
    st.tuples(st.just("copy_tag"), st.integers(0, 2**31), _OFFSET),
    st.tuples(st.just("bytes"), st.lists(_OP, min_size=1, max_size=2)),
)


def apply_xml_op(data: bytes, op: tuple[Any, ...]) -> bytes:
    kind = op[0]
    if kind == "snippet":
        at = _at(op[1], len(data))
        return data[:at] + op[2] + data[at:]
    if kind == "number":
        found = list(_ATTR_VALUE.finditer(data))
        if not found:
            return data
        match = found[op[1] % len(found)]
        return data[: match.start(1)] + op[2] + data[match.end(1) :]
    if kind in ("drop_tag", "copy_tag"):
        found = list(_TAG.finditer(data))
        if not found:
            return data
        match = found[op[1] % len(found)]
        if kind == "drop_tag":
            return data[: match.start()] + data[match.end() :]
        at = _at(op[2], len(data))
        return data[:at] + match.group(0) + data[at:]
    return apply_ops(data, op[1])


def read_members(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


def build_zip(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members:
            archive.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), content, zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


@st.composite
def mutated_zip(draw: st.DrawFn, name: str) -> Mutant:
    """An Office file with its parts mutated and re-zipped (duplicate names allowed on purpose)."""
    mode = draw(st.sampled_from(["xml", "xml", "xml", "structure", "raw"]))
    if mode == "raw":
        return draw(mutated_bytes(name))
    members = read_members(seed(name))
    if mode == "structure":
        index = draw(st.integers(0, len(members) - 1))
        action = draw(st.sampled_from(["drop", "duplicate", "rename", "add", "empty"]))
        member, content = members[index]
        detail: Any = None
        if action == "drop":
            del members[index]
        elif action == "duplicate":
            detail = draw(st.sampled_from([content, b"", b"<x/>"]))
            members.append((member, detail))
            detail = detail[:20]
        elif action == "rename":
            detail = draw(st.sampled_from([member.upper(), member + "x", "/" + member, "../" + member]))
            members[index] = (detail, content)
        elif action == "add":
            detail = draw(st.sampled_from(["[Content_Types].xml", "_rels/.rels", "x.xml"]))
            members.append((detail, b"<x/>"))
        else:
            members[index] = (member, b"")
        return Mutant(build_zip(members), f"{name}: {action} {member} {detail!r}")
    xml_indexes = [i for i, (member, _) in enumerate(members) if member.endswith((".xml", ".rels"))]
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        index = draw(st.sampled_from(xml_indexes))
        member, content = members[index]
        op = draw(_XML_OP)
        members[index] = (member, apply_xml_op(content, op))
        steps.append((member, op))
    return Mutant(build_zip(members), f"{name}: {steps}")
