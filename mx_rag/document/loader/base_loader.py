# SPDX-License-Identifier: Apache-2.0
"""``BaseLoader``: what every mx_rag loader shares.

* The path is checked at construction (``check_file``: a regular file of at most 100 MiB, no
  ``..`` components, symlinks resolved); ``metadata["source"]`` is the resolved path.
* The file is read once, with the size limit enforced again, and parsed from memory.
* Any failure of a parsing library becomes ``DocumentError`` naming the file, with the cause
  chained and its message cut to one line (``describe``); errors of mx_rag itself
  (``ParameterError``, ``DocumentError``) pass unchanged.
* Office Open XML files (docx, pptx, xlsx) are checked for zip bombs before they are opened.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any, ClassVar

from langchain_core.document_loaders import BaseLoader as LangChainBaseLoader
from langchain_core.documents import Document

from mx_rag.errors import DocumentError, MxRagError, ParameterError
from mx_rag.utils.checks import check_bool, check_instance
from mx_rag.utils.common import MAX_FILE_SIZE, MB, Lang
from mx_rag.utils.file_check import check_file

__all__ = ["BaseLoader", "check_ocr", "check_zip", "clean_text", "describe"]

MAX_PAGE_NUM = 1000        # PDF pages, slides, Excel sheets
MAX_WORD_NUM = 500_000     # characters of text in a Word document
MAX_ZIP_ENTRIES = 5120
MAX_ZIP_UNCOMPRESSED = 500 * MB
MAX_ZIP_RATIO = 200        # uncompressed / compressed, for entries above MIN_RATIO_CHECK
MIN_RATIO_CHECK = MB
MAX_CENTRAL_DIRECTORY = 8 * MB  # bytes of zip directory: MAX_ZIP_ENTRIES entries with long names
MAX_XML_PARSED = 32 * MB   # XML a loader parses whole into a tree (python-docx, python-pptx load
                           # every part at once; a tree takes up to 30 times the XML's size)
_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_EOCD64 = b"PK\x06\x06"
_LOCAL_HEADER = b"PK\x03\x04"
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
MAX_CAUSE_CHARS = 300      # of a library's message quoted in a DocumentError


class BaseLoader(LangChainBaseLoader):
    """Base class of the mx_rag loaders (a LangChain ``BaseLoader``: ``load()``, ``lazy_load()``).

    Subclasses set ``SUFFIXES`` (None accepts any suffix) and implement ``_load()``.

    Example:
        >>> from mx_rag.document.loader import TextLoader
        >>> docs = TextLoader("/data/notes.txt").load()  # doctest: +SKIP
        >>> docs[0].metadata["source"]  # doctest: +SKIP
        '/data/notes.txt'
    """

    SUFFIXES: ClassVar[tuple[str, ...] | None] = None
    MAX_SIZE: ClassVar[int] = MAX_FILE_SIZE

    def __init__(self, file_path: str | os.PathLike[str]) -> None:
        self.path = check_file("file_path", file_path, self.MAX_SIZE)
        if self.SUFFIXES is not None and self.path.suffix.lower() not in self.SUFFIXES:
            raise ParameterError(
                f"file_path {os.fspath(file_path)!r} must be a file ending with one of {list(self.SUFFIXES)} "
                f"for {type(self).__name__}, got suffix {self.path.suffix!r}"
            )
        self.file_path = str(self.path)

    def lazy_load(self) -> Iterator[Document]:
        """Yield the documents of the file; a file that cannot be parsed raises ``DocumentError``."""
        try:
            yield from self._load()
        except MxRagError:
            raise
        except Exception as exc:
            raise DocumentError(f"cannot load {self.file_path!r} with {type(self).__name__}: {describe(exc)}") from exc

    def _load(self) -> Iterator[Document]:
        raise NotImplementedError

    def _read_bytes(self) -> bytes:
        """The file's bytes, refusing a file that grew past the limit since construction."""
        with self.path.open("rb") as handle:
            data = handle.read(self.MAX_SIZE + 1)
        if len(data) > self.MAX_SIZE:
            raise DocumentError(f"{self.file_path!r} is larger than the limit of {self.MAX_SIZE} bytes")
        return data

    def _text_document(self, text: str, **metadata: Any) -> Document:
        return Document(page_content=text, metadata={"source": self.file_path, "type": "text", **metadata})


def describe(exc: BaseException) -> str:
    """``Type: message`` of a library's exception as one line of at most 300 message characters.

    Parsers put line breaks, XML excerpts or whole dumps in their messages; a ``DocumentError``
    stays one line.
    """
    text = " ".join(str(exc).split())
    if len(text) > MAX_CAUSE_CHARS:
        text = text[:MAX_CAUSE_CHARS] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def clean_text(text: str) -> str:
    """Drop NUL characters (some PDFs emit them; databases refuse them) and outer whitespace."""
    return text.replace("\x00", "").strip()


def check_ocr(enable_ocr: Any, lang: Any) -> bool:
    """``lang`` must be a ``Lang``; ``enable_ocr`` a bool, and True only with the ``ocr`` extra installed.

    Raises:
        ParameterError: a wrong type.
        ExtraNotInstalledError: ``enable_ocr=True`` without the OCR engine (``pip install "mxrag[ocr]"``).
    """
    check_instance("lang", lang, Lang)
    if check_bool("enable_ocr", enable_ocr):
        from mx_rag.document.loader._ocr import require_ocr

        require_ocr()
    return bool(enable_ocr)


def check_zip(data: bytes, source: str, kind: str, streamed: tuple[str, ...] = ()) -> None:
    """Refuse an Office Open XML file that is encrypted, not a zip, or a zip bomb.

    A zip bomb here is: at least 5120 entries (or a directory too large for that many), more
    than 500 MiB uncompressed in total, an entry above 1 MiB that expands more than 200 times,
    entries whose data overlap (one deflate stream counted many times), an entry whose data does
    not inflate to its declared size and CRC (checked 1 MiB at a time), or more than 32 MiB of
    XML to parse whole: XML parts whose name does not start with one of ``streamed`` (parts the
    loader reads as a stream, such as Excel worksheets).
    """
    if data[:8] == OLE_MAGIC:
        raise DocumentError(
            f"{source!r} is encrypted or not a {kind} file: it is an OLE compound document, not an Office "
            f"Open XML zip (password-protected Office files are stored this way); remove the password and "
            f"save it as {kind}"
        )
    declared = _directory_size(data)
    if declared is not None:
        count, size = declared
        if count >= MAX_ZIP_ENTRIES or size > MAX_CENTRAL_DIRECTORY:
            raise DocumentError(f"{source!r} looks like a zip bomb: {count} entries in a directory of {size} bytes "
                                f"(limit {MAX_ZIP_ENTRIES - 1} entries, {MAX_CENTRAL_DIRECTORY} bytes)")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error) as exc:
        raise DocumentError(f"{source!r} is not a valid {kind} file (not a zip archive: {describe(exc)})") from exc
    with archive:
        entries = _check_entries(data, archive, source)
    parsed = sum(entry.file_size for entry in entries
                 if entry.filename.lower().endswith((".xml", ".rels")) and not entry.filename.startswith(streamed))
    if parsed > MAX_XML_PARSED:
        raise DocumentError(f"{source!r} holds {parsed} bytes of XML to parse, more than the limit of "
                            f"{MAX_XML_PARSED} (a zip bomb, or a document too large to load)")


def _check_entries(data: bytes, archive: zipfile.ZipFile, source: str) -> list[zipfile.ZipInfo]:
    """The entries, once their count, sizes, layout and data are checked."""
    entries = archive.infolist()
    directory_start = int(getattr(archive, "start_dir", len(data)))
    if len(entries) >= MAX_ZIP_ENTRIES:
        raise DocumentError(f"{source!r} looks like a zip bomb: {len(entries)} entries (limit {MAX_ZIP_ENTRIES - 1})")
    total = sum(entry.file_size for entry in entries)
    if total > MAX_ZIP_UNCOMPRESSED:
        raise DocumentError(
            f"{source!r} looks like a zip bomb: {total} bytes uncompressed (limit {MAX_ZIP_UNCOMPRESSED})"
        )
    for entry in entries:
        ratio = entry.file_size / max(entry.compress_size, 1)
        if entry.file_size > MIN_RATIO_CHECK and ratio > MAX_ZIP_RATIO:
            raise DocumentError(
                f"{source!r} looks like a zip bomb: entry {entry.filename!r} expands {ratio:.0f} times "
                f"(limit {MAX_ZIP_RATIO})"
            )
    _check_no_overlap(data, entries, directory_start, source)
    for entry in entries:
        _check_inflates_as_declared(archive, entry, source)
    return entries


def _check_inflates_as_declared(archive: zipfile.ZipFile, entry: zipfile.ZipInfo, source: str) -> None:
    """Inflate the entry 1 MiB at a time: its data must give its declared size and CRC.

    The parsers read an entry whole, and zipfile inflates it into a buffer as large as the
    data gives (the declared size only cuts the result), so a stream declared as 30 kB that
    inflates to gigabytes would exhaust memory there; here it stops at the declared size.
    """
    try:
        with archive.open(entry) as member:
            while member.read(MB):
                pass
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError, NotImplementedError,
            zlib.error) as exc:
        raise DocumentError(f"{source!r} is damaged or a zip bomb: entry {entry.filename!r} does not inflate to "
                            f"its declared {entry.file_size} bytes ({describe(exc)})") from exc


def _directory_size(data: bytes) -> tuple[int, int] | None:
    """(entries, bytes) the end-of-directory record declares, read before zipfile parses the
    directory (it builds an object per entry, whatever the count); None when there is none."""
    end = data.rfind(_EOCD, max(0, len(data) - 22 - 65535))
    if end < 0 or end + 22 > len(data):
        return None
    count, size = struct.unpack_from("<HI", data, end + 10)
    locator = end - 20
    if (count == 0xFFFF or size == 0xFFFFFFFF) and locator >= 0 and data.startswith(_EOCD64_LOCATOR, locator):
        (offset,) = struct.unpack_from("<Q", data, locator + 8)
        if offset + 56 <= len(data) and data.startswith(_EOCD64, offset):
            count, size = struct.unpack_from("<QQ", data, offset + 32)
    return count, size


def _check_no_overlap(data: bytes, entries: list[zipfile.ZipInfo], directory_start: int, source: str) -> None:
    """Each entry's local header and data must end before the next entry starts (a "better zip
    bomb" points many entries at one stream, or quotes the next entry's header inside its data)."""
    ordered = sorted(entries, key=lambda entry: entry.header_offset)
    for index, entry in enumerate(ordered):
        start = entry.header_offset
        if start < 0 or start + 30 > len(data) or not data.startswith(_LOCAL_HEADER, start):
            raise DocumentError(f"{source!r} is not a valid zip file: entry {entry.filename!r} has no local header")
        name_length, extra_length = struct.unpack_from("<HH", data, start + 26)
        end = start + 30 + name_length + extra_length + entry.compress_size
        limit = ordered[index + 1].header_offset if index + 1 < len(ordered) else directory_start
        if end > limit:
            raise DocumentError(f"{source!r} looks like a zip bomb: entry {entry.filename!r} overlaps the next "
                                "entry (overlapping entries inflate the same data many times)")
