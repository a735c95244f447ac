# SPDX-License-Identifier: Apache-2.0
"""``PreparedFile`` (a parsed and embedded document) and what makes one: the checks of texts and
metadatas, and running the dense and sparse embedders with the checks of what they return."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mx_rag.errors import ParameterError
from mx_rag.storage.vectorstore.vectorstore import as_matrix
from mx_rag.utils.checks import check_str, fail

__all__ = ["EmbedFunc", "PreparedFile", "check_embeddings", "embed_texts", "run_embedders"]

MAX_TEXTS = 1_000_000
EmbedFunc = Callable[[list[str]], Any]



@dataclass
class PreparedFile:
    """A parsed and embedded document, ready for ``KnowledgeDB.add_prepared``."""

    path: Path
    texts: list[str]
    metadatas: list[dict[str, Any]]
    dense: Any  # (n, dim) float32 matrix, or None
    sparse: list[dict[int, float]] | None
    content_hash: str | None = None
    replace: bool = False  # replace the document at ``path`` if there is one (else it is an error)


def _check_texts(texts: Any) -> list[str]:
    if not isinstance(texts, (list, tuple)) or not 1 <= len(texts) <= MAX_TEXTS:
        raise fail("texts", texts, f"a list of 1 to {MAX_TEXTS} strings")
    for i, text in enumerate(texts):
        check_str(f"texts[{i}]", text, 1, 128 * 1024 * 1024)
    return list(texts)


def _check_metadatas(metadatas: Any, count: int) -> list[dict[str, Any]]:
    if metadatas is None:
        return [{} for _ in range(count)]
    if not isinstance(metadatas, (list, tuple)) or len(metadatas) != count:
        raise fail("metadatas", metadatas, f"None or a list of {count} dicts (one per text)")
    if not all(isinstance(m, dict) for m in metadatas):
        raise fail("metadatas", metadatas, "a list of dicts")
    return list(metadatas)


def embed_texts(embed_func: Any, texts: list[str]) -> tuple[Any, Any]:
    """Dense and sparse embeddings of ``texts`` (each None when that embedder is not given)."""
    return check_embeddings(run_embedders(embed_func, texts), len(texts))


def run_embedders(embed_func: Any, texts: list[str]) -> tuple[Any, Any]:
    """What the dense and sparse embedders return for ``texts`` (None where not given), unchecked."""
    funcs = embed_func if isinstance(embed_func, dict) else {"dense": embed_func, "sparse": None}
    if set(funcs) - {"dense", "sparse"} or not any(funcs.values()):
        raise fail("embed_func", embed_func, "a callable or a dict {'dense': f, 'sparse': g} with at least one set")
    for key in ("dense", "sparse"):
        if funcs.get(key) is not None and not callable(funcs[key]):
            raise fail(f"embed_func[{key!r}]", funcs[key], "a callable")
    dense = None if funcs.get("dense") is None else funcs["dense"](texts)
    sparse = None if funcs.get("sparse") is None else funcs["sparse"](texts)
    return dense, sparse


def check_embeddings(raw: tuple[Any, Any], count: int) -> tuple[Any, Any]:
    """The embedders' results as a float32 matrix and a list of dicts, one per text.

    Raises:
        ParameterError: a result of the wrong shape or type (the embedder does not fit).
    """
    dense, sparse = raw
    if dense is not None:
        dense = as_matrix("dense embeddings", dense)
        if dense.shape[0] != count:
            raise ParameterError(f"embed_func returned {dense.shape[0]} vectors for {count} texts")
    if sparse is not None:
        sparse = list(sparse) if isinstance(sparse, (list, tuple)) else sparse
        if not isinstance(sparse, list) or len(sparse) != count or not all(isinstance(x, dict) for x in sparse):
            raise ParameterError(f"sparse embed_func must return {count} dicts, one per text")
    if dense is None and sparse is None:
        raise ParameterError("embed_func returned no embeddings (neither dense nor sparse)")
    return dense, sparse
