# SPDX-License-Identifier: Apache-2.0
"""``LoaderMng``: which loader and which splitter handle a file suffix.

Suffixes match case-insensitively (".PDF" finds ".pdf"); the original matched them exactly.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from mx_rag.errors import DocumentError, ExtraNotInstalledError, ParameterError, UnsupportedFileTypeError
from mx_rag.utils.checks import check_int, fail
from mx_rag.utils.common import MAX_FILE_SIZE
from mx_rag.utils.file_check import check_file
from mx_rag.utils.tracing import stage

__all__ = ["LoaderInfo", "LoaderMng", "SplitterInfo"]

logger = logging.getLogger(__name__)

MAX_REGISTRATIONS = 1000
MAX_FILE_TYPES = 32
MAX_SUFFIX_LEN = 32
MAX_PARAMS = 1024
SPLITTER_PARAMS_DEPTH = 2  # the params dict and one level of lists or dicts in it, as in the original
_CONTAINERS = (dict, list, tuple, set, frozenset)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
TEXT_SUFFIXES = (".pdf", ".docx", ".pptx", ".xlsx", ".md", ".markdown", ".txt", ".html", ".htm")
# sentence ends first, so Chinese and English chunks break between sentences where they can
DEFAULT_SEPARATORS = ["\n\n", "\n", "。", "！", "？", "；", ". ", "! ", "? ", "; ", "，", ", ", " ", ""]


@dataclass(frozen=True)
class LoaderInfo:
    """A registered loader: built as ``loader_class(file_path=..., **loader_params)``.

    Example:
        >>> info = LoaderMng.with_defaults().get_loader(".pdf")  # doctest: +SKIP
        >>> loader = info.loader_class(file_path="a.pdf", **info.loader_params)  # doctest: +SKIP
    """

    loader_class: type[BaseLoader]
    loader_params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SplitterInfo:
    """A registered splitter: built as ``splitter_class(**splitter_params)``.

    Example:
        >>> info = LoaderMng.with_defaults().get_splitter(".pdf")  # doctest: +SKIP
        >>> splitter = info.splitter_class(**info.splitter_params)  # doctest: +SKIP
    """

    splitter_class: type[TextSplitter]
    splitter_params: dict[str, Any] = field(default_factory=dict)


def _check_class(name: str, value: Any, base: type) -> type:
    if not isinstance(value, type) or not issubclass(value, base):
        raise fail(name, value, f"a subclass of {base.__module__}.{base.__qualname__}")
    return value


def _check_file_types(file_types: Any) -> list[str]:
    if isinstance(file_types, str) or not isinstance(file_types, (list, tuple)):
        raise fail("file_types", file_types, 'a list of suffixes such as [".pdf"]')
    if not 1 <= len(file_types) <= MAX_FILE_TYPES:
        raise ParameterError(f"file_types must hold 1 to {MAX_FILE_TYPES} suffixes, got {len(file_types)}")
    suffixes = []
    for suffix in file_types:
        if not isinstance(suffix, str) or not 1 <= len(suffix) <= MAX_SUFFIX_LEN or not suffix.startswith("."):
            raise fail("file_types item", suffix, f'a str of 1 to {MAX_SUFFIX_LEN} characters starting with "."')
        suffixes.append(suffix.lower())
    return suffixes


def _check_params(name: str, params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise fail(name, params, "None or a dict of keyword arguments")
    if len(params) > MAX_PARAMS:
        raise ParameterError(f"{name} may hold at most {MAX_PARAMS} entries, got {len(params)}")
    for key in params:
        if not isinstance(key, str) or not key.isidentifier():
            raise fail(f"{name} key", key, "a keyword-argument name")
    if "file_path" in params:
        raise ParameterError(f"{name} must not contain 'file_path': the manager passes the file itself")
    return dict(params)


def _check_nesting(name: str, value: Any, depth: int, levels: int) -> None:
    """Containers may nest ``levels`` deep (the outermost is level 1); deeper ones are refused.

    Each nested container holds at most ``MAX_PARAMS`` items.
    """
    if not isinstance(value, _CONTAINERS):
        return
    if depth > levels:
        raise fail(name, value, f"a str, number, bool or None: parameters may nest at most {levels} levels "
                                "(a dict holding lists or dicts of plain values)")
    if len(value) > MAX_PARAMS:
        raise ParameterError(f"{name} may hold at most {MAX_PARAMS} items, got {len(value)}")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_nesting(f"{name}[{key!r}]", item, depth + 1, levels)
    else:
        for index, item in enumerate(value):
            _check_nesting(f"{name}[{index}]", item, depth + 1, levels)


class LoaderMng:
    """Registry of loaders and splitters by file suffix.

    ``loaders`` and ``splitters`` are the public dicts (suffix → ``LoaderInfo`` /
    ``SplitterInfo``). Any LangChain ``BaseLoader`` subclass taking ``file_path`` works as a
    loader; any ``TextSplitter`` subclass as a splitter.

    Example:
        >>> from langchain_text_splitters import RecursiveCharacterTextSplitter
        >>> from mx_rag.document import LoaderMng
        >>> from mx_rag.document.loader import PdfLoader
        >>> mng = LoaderMng()
        >>> mng.register_loader(PdfLoader, [".pdf"])
        >>> mng.register_splitter(RecursiveCharacterTextSplitter, [".pdf"], {"chunk_size": 500})
        >>> mng.get_loader(".PDF").loader_class is PdfLoader
        True
        >>> chunks = LoaderMng.with_defaults().load_and_split("report.pdf")  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.loaders: dict[str, LoaderInfo] = {}
        self.splitters: dict[str, SplitterInfo] = {}

    @classmethod
    def with_defaults(cls, chunk_size: int = 750, chunk_overlap: int = 150, vlm: Any = None) -> LoaderMng:
        """A manager for a text knowledge base: every text loader, a recursive splitter for each.

        With ``vlm`` (an ``Img2TextLLM``), images inside documents are captioned and image files
        (.jpg, .jpeg, .png) are loaded as their caption. Without one, image files get no loader:
        their base64 is never indexed as text (callers list them as unsupported or skipped;
        register ``ImageLoader`` with ``{"enable_ocr": True}`` to index their text). PDF pages
        without a text layer are read by OCR whenever ``mxrag[ocr]`` is installed (``PdfLoader``).
        """
        check_int("chunk_size", chunk_size, 1, MAX_FILE_SIZE)
        check_int("chunk_overlap", chunk_overlap, 0, chunk_size - 1)
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        from mx_rag.document import loader
        from mx_rag.document.loader._images import check_vlm

        captions = {"vlm": check_vlm(vlm)} if vlm is not None else None
        mng = cls()
        mng.register_loader(loader.PdfLoader, [".pdf"], captions)
        mng.register_loader(loader.DocxLoader, [".docx"], captions)
        mng.register_loader(loader.PowerPointLoader, [".pptx"], captions)
        mng.register_loader(loader.ExcelLoader, [".xlsx"])
        mng.register_loader(loader.MarkdownLoader, [".md", ".markdown"], captions)
        mng.register_loader(loader.TextLoader, [".txt"])
        mng.register_loader(loader.HtmlLoader, [".html", ".htm"])
        if captions is not None:
            mng.register_loader(loader.ImageLoader, list(IMAGE_SUFFIXES), captions)
        params = {"chunk_size": chunk_size, "chunk_overlap": chunk_overlap,
                  "separators": DEFAULT_SEPARATORS, "keep_separator": "end"}
        mng.register_splitter(RecursiveCharacterTextSplitter, list(TEXT_SUFFIXES), params)
        return mng

    # -- registration --------------------------------------------------------------------------

    def register_loader(self, loader_class: type[BaseLoader], file_types: list[str],
                        loader_params: dict[str, Any] | None = None) -> None:
        """Use ``loader_class`` for files with these suffixes (replacing any earlier loader)."""
        info = LoaderInfo(_check_class("loader_class", loader_class, BaseLoader),
                          _check_params("loader_params", loader_params))
        self._register(self.loaders, "loader", _check_file_types(file_types), info)

    def register_splitter(self, splitter_class: type[TextSplitter], file_types: list[str],
                          splitter_params: dict[str, Any] | None = None) -> None:
        """Use ``splitter_class`` for these suffixes; images (.jpg, .jpeg, .png) are never split.

        ``splitter_params`` values may be plain values or lists/dicts of plain values (such as
        ``separators``); deeper nesting is refused.
        """
        cls = _check_class("splitter_class", splitter_class, TextSplitter)
        params = _check_params("splitter_params", splitter_params)
        _check_nesting("splitter_params", params, 1, SPLITTER_PARAMS_DEPTH)
        info = SplitterInfo(cls, params)
        suffixes = _check_file_types(file_types)
        images = [suffix for suffix in suffixes if suffix in IMAGE_SUFFIXES]
        if images:
            raise ParameterError(f"file_types {images} are image suffixes: images are embedded whole, not split")
        self._register(self.splitters, "splitter", suffixes, info)

    def _register(self, table: dict[str, Any], kind: str, suffixes: list[str], info: Any) -> None:
        new = {suffix for suffix in suffixes if suffix not in table}
        if len(table) + len(new) > MAX_REGISTRATIONS:
            raise ParameterError(f"at most {MAX_REGISTRATIONS} suffixes may have a {kind}; "
                                 f"{len(table)} are registered and {len(new)} more were given")
        for suffix in suffixes:
            if suffix in table:
                logger.warning("the %s for %s is replaced", kind, suffix)
            table[suffix] = info

    def unregister_loader(self, loader_class: type[BaseLoader], file_suffix: str | None = None) -> None:
        """Remove ``loader_class`` for ``file_suffix``, or for every suffix when it is None."""
        self._unregister(self.loaders, "loader", loader_class, file_suffix, "loader_class")

    def unregister_splitter(self, splitter_class: type[TextSplitter], file_suffix: str | None = None) -> None:
        """Remove ``splitter_class`` for ``file_suffix``, or for every suffix when it is None."""
        self._unregister(self.splitters, "splitter", splitter_class, file_suffix, "splitter_class")

    @staticmethod
    def _unregister(table: dict[str, Any], kind: str, cls: type, suffix: str | None, attr: str) -> None:
        if suffix is not None:
            suffix = _check_file_types([suffix])[0]
            found = [suffix] if suffix in table and getattr(table[suffix], attr) is cls else []
        else:
            found = [key for key, info in table.items() if getattr(info, attr) is cls]
        if not found:
            where = f"suffix {suffix!r}" if suffix is not None else "any suffix"
            raise UnsupportedFileTypeError(f"{getattr(cls, '__name__', cls)} is not the {kind} of {where}")
        for key in found:
            del table[key]

    # -- lookup --------------------------------------------------------------------------------

    def get_loader(self, file_suffix: str) -> LoaderInfo:
        """The loader for a suffix; ``UnsupportedFileTypeError`` (a KeyError) if none."""
        return self._lookup(self.loaders, "loader", file_suffix)

    def get_splitter(self, file_suffix: str) -> SplitterInfo:
        """The splitter for a suffix; ``UnsupportedFileTypeError`` (a KeyError) if none."""
        return self._lookup(self.splitters, "splitter", file_suffix)

    @staticmethod
    def _lookup(table: dict[str, Any], kind: str, suffix: Any) -> Any:
        if not isinstance(suffix, str):
            raise fail("file_suffix", suffix, 'a str such as ".pdf"')
        info = table.get(suffix.lower())
        if info is None:
            raise UnsupportedFileTypeError(
                f"no {kind} is registered for file suffix {suffix!r}; registered: {sorted(table)}"
            )
        return info

    # -- loading -------------------------------------------------------------------------------

    def load_and_split(self, file_path: str | os.PathLike[str]) -> list[Document]:
        """Load a file with the loader of its suffix and split its non-image Documents.

        Chunks keep their document's metadata; empty chunks are dropped. Image Documents are
        returned whole. A Markdown table (OCRed tables, Markdown files) stays one chunk with the
        line above it (metadata ``table``: True), cut between rows with its header repeated when
        longer than the splitter's chunk size. A file the loader cannot read raises ``DocumentError`` naming the file.
        """
        path = check_file("file_path", file_path, MAX_FILE_SIZE)
        suffix = path.suffix.lower()
        loader_info = self.get_loader(suffix)
        splitter = self._splitter(suffix) if suffix not in IMAGE_SUFFIXES else None
        with stage("load", suffix=suffix):
            documents = self._load(path, loader_info)
        chunks: list[Document] = []
        with stage("split"):
            for document in documents:
                if document.metadata.get("type") == "image" or splitter is None:
                    chunks.append(document)
                    continue
                chunks.extend(self._split(path, splitter, document))
        return chunks

    @staticmethod
    def _split(path: Path, splitter: TextSplitter, document: Document) -> list[Document]:
        """The splitter's chunks, except that a Markdown table stays whole with its caption
        (or is cut between rows, its header repeated, when longer than the chunk size)."""
        from mx_rag.document.loader._layout import split_tables

        size = getattr(splitter, "_chunk_size", None)
        pieces = split_tables(document.page_content, size) if isinstance(size, int) and "|" in document.page_content \
            else [(document.page_content, False)]
        chunks: list[Document] = []
        for text, is_table in pieces:
            if is_table:
                chunks.append(Document(page_content=text, metadata={**document.metadata, "table": True}))
                continue
            try:
                split = splitter.split_documents([Document(page_content=text, metadata=document.metadata)])
            except Exception as exc:
                raise DocumentError(f"cannot split {str(path)!r} with {type(splitter).__name__}: {exc}") from exc
            chunks.extend(piece for piece in split if piece.page_content.strip())
        return chunks

    def _splitter(self, suffix: str) -> TextSplitter:
        info = self.get_splitter(suffix)
        try:
            return info.splitter_class(**info.splitter_params)
        except Exception as exc:
            raise ParameterError(f"cannot build {info.splitter_class.__name__} with splitter_params "
                                 f"{info.splitter_params}: {exc}") from exc

    @staticmethod
    def _load(path: Path, info: LoaderInfo) -> Iterable[Document]:
        name = info.loader_class.__name__
        try:
            return info.loader_class(file_path=str(path), **info.loader_params).load()  # type: ignore[call-arg]
        except (ParameterError, DocumentError, ExtraNotInstalledError):
            raise
        except Exception as exc:
            raise DocumentError(f"cannot load {str(path)!r} with {name}: {type(exc).__name__}: {exc}") from exc
