# SPDX-License-Identifier: Apache-2.0
"""``upload_files``, ``upload_dir`` and ``delete_files``: files in and out of a ``KnowledgeDB``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mx_rag.errors import DocumentError, KnowledgeError, MxRagError
from mx_rag.knowledge.knowledge import MAX_FILE_COUNT, KnowledgeDB
from mx_rag.utils.checks import check_bool, check_instance, fail
from mx_rag.utils.common import MAX_FILE_SIZE
from mx_rag.utils.file_check import check_dir, check_file

__all__ = ["FileHandlerError", "FilesLoadInfo", "delete_files", "upload_dir", "upload_files"]

logger = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


class FileHandlerError(KnowledgeError):
    """A file cannot be uploaded (duplicate without ``force``, too many files)."""


def upload_files(
    knowledge: KnowledgeDB,
    files: Sequence[str],
    loader_mng: Any,
    embed_func: Callable[[list[str]], Any] | dict[str, Any],
    force: bool = False,
) -> list[str]:
    """Load, split, embed and store ``files``; return the files that failed.

    Every path is checked before anything is stored (exists, at most 100 MiB, inside the
    knowledge base's ``white_paths``, no duplicate unless ``force``): a bad path raises and
    nothing is uploaded. A file that fails to parse, embed or store is rolled back completely
    and listed in the result. With ``force=True`` an existing document is replaced only after
    the new version parsed and embedded.
    """
    from mx_rag.document import LoaderMng

    check_instance("knowledge", knowledge, KnowledgeDB)
    check_instance("loader_mng", loader_mng, LoaderMng)
    check_bool("force", force)
    paths = _check_files(knowledge, files, force)
    failed: list[str] = []
    for given, path in zip(files, paths, strict=True):
        try:
            _upload_one(knowledge, path, loader_mng, embed_func, force)
        except (MxRagError, OSError) as exc:
            logger.warning("upload of %s failed: %s", path.name, exc)
            failed.append(given)
    return failed


def _check_files(knowledge: KnowledgeDB, files: Any, force: bool) -> list[Path]:
    if not isinstance(files, (list, tuple)) or not all(isinstance(f, (str, Path)) for f in files):
        raise fail("files", files, "a list of file paths")
    if len(files) > knowledge.max_file_count:
        raise FileHandlerError(f"{len(files)} files exceed max_file_count={knowledge.max_file_count}")
    paths = [knowledge.check_file_path(check_file(f"files[{i}]", f, MAX_FILE_SIZE)) for i, f in enumerate(files)]
    if len(set(paths)) != len(paths):
        raise FileHandlerError("files lists the same file twice")
    if not force:
        existing = [str(p) for p in paths if knowledge.check_document_exist(str(p))]
        if existing:
            raise FileHandlerError(f"already in the knowledge base (pass force=True to replace): {existing}")
    return paths


def _upload_one(knowledge: KnowledgeDB, path: Path, loader_mng: Any, embed_func: Any, force: bool) -> None:
    documents = [d for d in loader_mng.load_and_split(str(path)) if d.page_content.strip()]
    if not documents:
        raise DocumentError(f"{path.name}: no text could be extracted")
    texts = [d.page_content for d in documents]
    metadatas = [dict(d.metadata) for d in documents]
    if force and knowledge.check_document_exist(str(path)):
        knowledge.delete_file(str(path))
    knowledge.add_file(path, texts, embed_func, metadatas)


@dataclass
class FilesLoadInfo:
    """Arguments of ``upload_dir`` (the original's parameter object)."""

    knowledge: KnowledgeDB
    dir_path: str
    loader_mng: Any
    embed_func: Callable[[list[str]], Any]
    force: bool = False
    load_image: bool = False


def upload_dir(params: FilesLoadInfo) -> list[str]:
    """Upload the supported files at the top level of ``params.dir_path``.

    Supported: suffixes with a registered loader (and splitter, for text); with
    ``load_image=True``, only images (.jpg, .jpeg, .png). Returns the unsupported files followed
    by the files that failed.
    """
    check_instance("params", params, FilesLoadInfo)
    directory = check_dir("dir_path", params.dir_path)
    entries = sorted(directory.iterdir())
    if len(entries) > MAX_FILE_COUNT:
        raise FileHandlerError(f"{directory} holds {len(entries)} entries, more than {MAX_FILE_COUNT}")
    mng = params.loader_mng
    loaders = {s.lower() for s in mng.loaders}
    if params.load_image:
        wanted = loaders & set(IMAGE_SUFFIXES)
    else:
        wanted = (loaders & {s.lower() for s in mng.splitters}) - set(IMAGE_SUFFIXES)
    supported = [e for e in entries if e.is_file() and e.suffix.lower() in wanted]
    unsupported = [str(e) for e in entries if e not in supported]
    if len(supported) > params.knowledge.max_file_count:
        raise FileHandlerError(
            f"{len(supported)} supported files exceed max_file_count={params.knowledge.max_file_count}"
        )
    failed = upload_files(params.knowledge, [str(p) for p in supported], mng, params.embed_func, params.force)
    return unsupported + failed


def delete_files(knowledge: KnowledgeDB, doc_names: Sequence[str]) -> None:
    """Delete documents by full path (or by file name when it names exactly one)."""
    check_instance("knowledge", knowledge, KnowledgeDB)
    if not isinstance(doc_names, (list, tuple)) or not all(isinstance(n, str) for n in doc_names):
        raise fail("doc_names", doc_names, "a list of str")
    if len(doc_names) > knowledge.max_file_count:
        raise FileHandlerError(f"{len(doc_names)} names exceed max_file_count={knowledge.max_file_count}")
    for name in doc_names:
        knowledge.delete_file(name)
