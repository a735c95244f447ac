# SPDX-License-Identifier: Apache-2.0
"""Argument checks shared by the chunk stores and the vector stores: ``top_k``/``k``, id lists and
``filter_dict``. Each raises ``ParameterError`` naming the parameter, the value and the allowed range.

Limits:

* ``top_k``/``k``: an int in [1, ``MAX_TOP_K``] (10,000, ``mx_rag.utils.common``);
* an id: an int in [0, 2**63 - 1] (a SQL BIGINT, a FAISS/Milvus int64);
* a list of ids: at most ``MAX_IDS`` (1,000,000), both for chunk ids, vector ids and the
  ``document_id`` list of a filter;
* ``filter_dict``: None or a dict of at most 32 keys, of which only ``document_id`` is supported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

import numpy as np

from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_int, check_number, fail
from mx_rag.utils.common import MAX_TOP_K

__all__ = [
    "FILTER_KEYS",
    "MAX_FILTER_KEYS",
    "MAX_ID",
    "MAX_IDS",
    "MAX_TOP_K",
    "POST_FILTER_FETCH",
    "POST_FILTER_MIN_IDS",
    "POST_FILTER_SHARE",
    "POST_FILTER_SLACK",
    "DocumentIds",
    "check_filter",
    "check_id",
    "check_ids",
    "check_k",
    "check_top_k",
    "post_filter_fetch",
    "post_filter_first",
    "post_filter_keep",
]

MAX_ID = 2**63 - 1
MAX_IDS = 1_000_000
MAX_FILTER_KEYS = 32
# A filter on more documents than this is first applied after an unfiltered search for
# POST_FILTER_FETCH * k hits, keeping those of the documents (a knowledge base that fills most of a
# shared store); only where fewer than k remain does the store search with the filter. A filter
# of 100,000 ids costs more than the search itself, in SQL (IN lists) and in Milvus (expressions).
POST_FILTER_MIN_IDS = 1000
POST_FILTER_FETCH = 4
POST_FILTER_SHARE = 0.5  # ... and so is one of a DocumentIds holding at least this share of the documents
POST_FILTER_SLACK = 16  # hits asked for beyond k / share
FILTER_KEYS = ("document_id",)
Hit = TypeVar("Hit")


def check_top_k(top_k: Any, name: str = "top_k", high: int = MAX_TOP_K) -> int:
    """``top_k`` (or another count of results named ``name``): an int in [1, ``high``], at most MAX_TOP_K."""
    return check_int(name, top_k, 1, high)


def check_k(k: Any, high: int = MAX_TOP_K) -> int:
    """``k``: results to return, an int in [1, ``high``]."""
    return check_top_k(k, "k", high)


def check_id(name: str, value: Any) -> int:
    """One id: an int in [0, 2**63 - 1] (numpy ints accepted, returned as int)."""
    return check_int(name, int(value) if isinstance(value, np.integer) else value, 0, MAX_ID)


def _id_values(name: str, ids: Any, low: int) -> list[int]:
    """The ints of an id list, each in [0, MAX_ID], ``low`` to ``MAX_IDS`` of them."""
    expected = f"a list of {low} to {MAX_IDS} ints in [0, {MAX_ID}]"
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1 or (ids.dtype.kind not in "iuO" and len(ids)):
            raise fail(name, ids, expected)
    elif isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, AbstractSet)):
        raise fail(name, ids, expected)
    if not low <= len(ids) <= MAX_IDS:
        raise ParameterError(f"{name} must hold {low} to {MAX_IDS} ids, got {len(ids)}")
    values: list[Any] = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    if not all(type(v) is int for v in values):  # the common case needs no per-element checks
        values = [check_id(f"{name}[{i}]", v) for i, v in enumerate(values)]
    if values and not (min(values) >= 0 and max(values) <= MAX_ID):
        for i, value in enumerate(values):
            check_int(f"{name}[{i}]", value, 0, MAX_ID)
    return values


def check_ids(
    name: str, ids: Any, *, rows: int | None = None, allow_empty: bool = False, unique: bool = True
) -> np.ndarray:
    """Caller ids as a 1-D int64 array: a list (tuple, range, set, 1-D int array) of at most
    1,000,000 ints in [0, 2**63 - 1], ``rows`` of them if given, at least one unless ``allow_empty``.

    With ``unique`` a repeated id is an error; without it repeats are dropped (order kept).
    """
    values = _id_values(name, ids, 0 if allow_empty else 1)
    array = np.fromiter(values, dtype=np.int64, count=len(values))
    if rows is not None and len(array) != rows:
        raise ParameterError(f"{name} must hold one id per row ({rows}), got {len(array)} ids")
    if not unique:
        _, first = np.unique(array, return_index=True)
        return array[np.sort(first)]
    if len(np.unique(array)) != len(array):
        seen: set[int] = set()
        repeated = []
        for value in values:
            if value in seen:
                repeated.append(value)
            seen.add(value)
        raise ParameterError(f"{name} must not repeat an id, got repeated ids {repeated[:10]}")
    return array


class DocumentIds(list[int]):
    """A checked, sorted, duplicate-free list of document ids that stays unchanged: ``check_filter``
    returns it as is (no per-id check), and stores may keep what they derive from it (an id array,
    a selector) for as long as the same object comes back. ``KnowledgeRetriever`` passes one per
    knowledge-base generation. ``members`` is a frozenset of the ids, for membership tests.

    ``share``, when known, is the fraction of the documents of the stores that these ids hold (the
    knowledge registry's count): a scope holding at least half of them is first searched
    unfiltered and filtered afterwards (``post_filter_first``), however few the ids.
    """

    def __init__(self, ids: Any = (), share: float | None = None) -> None:
        super().__init__(sorted(set(_id_values("document_ids", ids, 0))))
        self.members = frozenset(self)
        self.share = None if share is None else check_number("share", share, 0.0, 1.0)

    def _frozen(self, *_: Any, **__: Any) -> Any:
        raise TypeError("DocumentIds cannot be changed")

    append = extend = insert = remove = pop = clear = sort = reverse = _frozen
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _frozen


def post_filter_first(document_ids: Sequence[int]) -> bool:
    """Whether a filtered search of ``document_ids`` should first try an unfiltered search for
    ``POST_FILTER_FETCH * k`` hits and keep those of the documents: more than
    ``POST_FILTER_MIN_IDS`` ids, or a ``DocumentIds`` holding at least half of the documents."""
    share = getattr(document_ids, "share", None)
    return len(document_ids) > POST_FILTER_MIN_IDS or (share is not None and share >= POST_FILTER_SHARE)


def post_filter_fetch(document_ids: Sequence[int], k: int) -> int:
    """How many unfiltered hits a post-filtered search of ``document_ids`` asks for to keep ``k``:
    ``k / share + POST_FILTER_SLACK`` for a ``DocumentIds`` that knows its share (enough when its
    documents are spread like the others), else ``POST_FILTER_FETCH * k``; at most both and MAX_TOP_K."""
    share = getattr(document_ids, "share", None)
    fetch = POST_FILTER_FETCH * k
    if share:
        fetch = min(fetch, math.ceil(k / share) + POST_FILTER_SLACK)
    return min(fetch, MAX_TOP_K)


def post_filter_keep(
    hits: Sequence[Hit], document_ids: Sequence[int], k: int, fetched: int, document_of: Callable[[Hit], int]
) -> list[Hit] | None:
    """The best ``k`` of ``hits`` (ranked, from an unfiltered search that asked for ``fetched``)
    whose document (``document_of(hit)``) is one of ``document_ids``; None when fewer than ``k``
    are left while the search returned all it asked for, so that more may exist: the caller then
    searches with the filter."""
    members = getattr(document_ids, "members", None) or frozenset(document_ids)
    kept = [hit for hit in hits if document_of(hit) in members][:k]
    return kept if len(kept) == k or len(hits) < fetched else None


def check_filter(filter_dict: Any) -> list[int] | None:
    """The document ids a ``filter_dict`` keeps (sorted, unique), or None for no filter.

    ``filter_dict`` is None or ``{}`` (no filter), or ``{"document_id": [ids]}`` with at most
    1,000,000 ints in [0, 2**63 - 1] (an empty list matches nothing). Any other key, and any value
    that is not a dict, is refused rather than ignored, so a typo cannot turn a filtered search
    into an unfiltered one.
    """
    if filter_dict is None:
        return None
    if not isinstance(filter_dict, Mapping):
        raise fail("filter_dict", filter_dict, 'None or a dict like {"document_id": [1, 2]}')
    if not filter_dict:
        return None
    if len(filter_dict) > MAX_FILTER_KEYS:
        raise ParameterError(f"filter_dict must have at most {MAX_FILTER_KEYS} keys, got {len(filter_dict)}")
    unknown = sorted(str(key) for key in filter_dict if key not in FILTER_KEYS)
    if unknown:
        raise ParameterError(f"filter_dict keys must be in {list(FILTER_KEYS)}, got unsupported keys {unknown}")
    value = filter_dict["document_id"]
    if isinstance(value, DocumentIds):
        return value
    return sorted(set(_id_values("filter_dict['document_id']", value, 0)))
