# SPDX-License-Identifier: Apache-2.0
"""``TextLoader``: a plain-text file as one Document, with its encoding detected.

Detection order: a byte-order mark (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE), then strict UTF-8,
then charset-normalizer's best guess (legacy code pages such as cp1252, GBK, Shift-JIS).
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator

from charset_normalizer import from_bytes
from langchain_core.documents import Document

from mx_rag.document.loader.base_loader import BaseLoader, clean_text
from mx_rag.errors import DocumentError
from mx_rag.utils.checks import check_optional_str

__all__ = ["TextLoader", "decode_text"]

_BOMS = (  # UTF-32 first: its little-endian mark starts with the UTF-16 one
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_text(data: bytes, source: str, encoding: str | None = None) -> str:
    """Decode ``data``: with ``encoding`` strictly, else BOM, UTF-8, then the best guess."""
    if encoding is not None:
        try:
            return data.decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise DocumentError(f"cannot decode {source!r} as {encoding}: {exc}") from exc
    for bom, name in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(name)
            except UnicodeDecodeError as exc:
                raise DocumentError(f"{source!r} starts with a {name} byte-order mark but is not {name}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    best = from_bytes(data).best()
    if best is None:
        raise DocumentError(f"{source!r} is not a text file: no text encoding fits its bytes")
    return str(best)


class TextLoader(BaseLoader):
    """Load a text file as one ``Document`` (``metadata``: source, type "text").

    A file holding only whitespace yields no documents. Any suffix is accepted.

    Args:
        file_path: the file (at most 100 MiB).
        encoding: decode with this encoding instead of detecting one.

    Example:
        >>> from mx_rag.document.loader import TextLoader
        >>> docs = TextLoader("notes.txt").load()  # doctest: +SKIP
        >>> docs[0].metadata["type"]  # doctest: +SKIP
        'text'
    """

    def __init__(self, file_path: str | os.PathLike[str], encoding: str | None = None) -> None:
        super().__init__(file_path)
        self.encoding = check_optional_str("encoding", encoding, 1, 64)

    def _load(self) -> Iterator[Document]:
        text = clean_text(decode_text(self._read_bytes(), self.file_path, self.encoding))
        if text:
            yield self._text_document(text)
