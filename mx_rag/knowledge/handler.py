# SPDX-License-Identifier: Apache-2.0
"""``upload_files``, ``upload_dir`` and ``delete_files``: files in and out of a ``KnowledgeDB``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mx_rag.errors import ParameterError
from mx_rag.knowledge.ingest import FileHandlerError, ingest_files
from mx_rag.knowledge.knowledge import MAX_FILE_COUNT, KnowledgeDB
from mx_rag.utils.checks import check_bool, check_instance, fail
from mx_rag.utils.file_check import check_dir

__all__ = ["FileHandlerError", "FilesLoadInfo", "check_embed_func", "delete_files", "upload_dir", "upload_files"]

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
EMBED_FUNC_KEYS = ("dense", "sparse")
_EMBED_FUNC_FORM = "a callable, or a dict {'dense': f, 'sparse': g} of callables or None with at least one set"


def check_embed_func(embed_func: Any) -> Callable[[list[str]], Any] | dict[str, Any]:
    """``embed_func`` of an upload: a callable (dense vectors), or ``{"dense": f, "sparse": g}``.

    In the dict, each key is optional, each value a callable or None, and at least one is set.
    Raises ``ParameterError`` otherwise, before anything is parsed or stored.
    """
    if isinstance(embed_func, Mapping):
        unknown = [key for key in embed_func if key not in EMBED_FUNC_KEYS]
        if unknown:
            raise ParameterError(
                f"embed_func may only have the keys {list(EMBED_FUNC_KEYS)}, got unknown key(s) {unknown!r}"
            )
        for key, func in embed_func.items():
            if func is not None and not callable(func):
                raise fail(f"embed_func[{key!r}]", func, "a callable or None")
        if all(func is None for func in embed_func.values()):
            raise fail("embed_func", dict(embed_func), _EMBED_FUNC_FORM)
        return dict(embed_func)
    if not callable(embed_func):
        raise fail("embed_func", embed_func, _EMBED_FUNC_FORM)
    return embed_func


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
    the new version parsed and embedded, and a file whose content did not change is skipped.
    Parsing runs in worker threads while earlier files are embedded.
    """
    from mx_rag.document import LoaderMng

    check_instance("knowledge", knowledge, KnowledgeDB)
    check_instance("loader_mng", loader_mng, LoaderMng)
    embed_func = check_embed_func(embed_func)
    check_bool("force", force)
    return ingest_files(knowledge, files, loader_mng, embed_func, force).failed


@dataclass
class FilesLoadInfo:
    """Arguments of ``upload_dir`` (the original's parameter object)."""

    knowledge: KnowledgeDB
    dir_path: str
    loader_mng: Any
    embed_func: Callable[[list[str]], Any] | dict[str, Any]
    force: bool = False
    load_image: bool = False


def upload_dir(params: FilesLoadInfo) -> list[str]:
    """Upload the supported files at the top level of ``params.dir_path``.

    Supported: suffixes with a registered loader (and splitter, for text); with
    ``load_image=True``, only images (.jpg, .jpeg, .png). Returns the unsupported files followed
    by the files that failed. Every field of ``params`` is checked before the directory is read.
    """
    from mx_rag.document import LoaderMng

    check_instance("params", params, FilesLoadInfo)
    check_instance("FilesLoadInfo.knowledge", params.knowledge, KnowledgeDB)
    directory = check_dir("FilesLoadInfo.dir_path", params.dir_path)
    check_instance("FilesLoadInfo.loader_mng", params.loader_mng, LoaderMng)
    check_embed_func(params.embed_func)
    check_bool("FilesLoadInfo.force", params.force)
    check_bool("FilesLoadInfo.load_image", params.load_image)
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
