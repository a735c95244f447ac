# SPDX-License-Identifier: Apache-2.0
"""The checks every store shares (mx_rag.storage.validation): boundaries and messages, and that the
chunk store and the vector store refuse the same values with the same message."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mx_rag.errors import ParameterError
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.validation import (
    MAX_FILTER_KEYS,
    MAX_ID,
    MAX_IDS,
    MAX_TOP_K,
    check_filter,
    check_id,
    check_ids,
    check_k,
    check_top_k,
)
from mx_rag.utils import common

INT_RANGE = f"[0, {MAX_ID}]"


def test_the_limits() -> None:
    assert MAX_TOP_K == common.MAX_TOP_K == 10_000
    assert MAX_IDS == 1_000_000 and MAX_ID == 2**63 - 1 and MAX_FILTER_KEYS == 32


# -- top_k / k -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [1, 2, MAX_TOP_K])
def test_top_k_accepts_its_range(value: int) -> None:
    assert check_top_k(value) == value and check_k(value) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "top_k must be in [1, 10000], got 0"),
        (MAX_TOP_K + 1, "top_k must be in [1, 10000], got 10001"),
        (-1, "top_k must be in [1, 10000], got -1"),
        (True, "top_k must be an int in [1, 10000], got True"),
        (3.0, "top_k must be an int in [1, 10000], got 3.0"),
        ("3", "top_k must be an int in [1, 10000], got '3'"),
        (None, "top_k must be an int in [1, 10000], got None"),
    ],
)
def test_top_k_messages_name_the_parameter_value_and_range(value: Any, message: str) -> None:
    with pytest.raises(ParameterError) as info:
        check_top_k(value)
    assert str(info.value) == message
    with pytest.raises(ParameterError) as info:
        check_k(value)
    assert str(info.value) == message.replace("top_k", "k", 1)


def test_top_k_takes_the_callers_name() -> None:
    with pytest.raises(ParameterError, match=r"^retrieve_top_k must be in \[1, 10000\], got 0$"):
        check_top_k(0, "retrieve_top_k")


# -- ids -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 1, MAX_ID, np.int64(7), np.uint32(3)])
def test_an_id_is_an_int_in_int64_range(value: Any) -> None:
    assert check_id("chunk_id", value) == int(value) and type(check_id("chunk_id", value)) is int


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, f"chunk_id must be in {INT_RANGE}, got -1"),
        (MAX_ID + 1, f"chunk_id must be in {INT_RANGE}, got {MAX_ID + 1}"),
        (False, f"chunk_id must be an int in {INT_RANGE}, got False"),
        (1.0, f"chunk_id must be an int in {INT_RANGE}, got 1.0"),
    ],
)
def test_a_bad_id_is_refused_with_its_range(value: Any, message: str) -> None:
    with pytest.raises(ParameterError) as info:
        check_id("chunk_id", value)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "ids", [[1, 2, 3], (1, 2, 3), range(1, 4), np.array([1, 2, 3]), np.array([1, 2, 3], dtype=np.uint8)]
)
def test_id_lists_of_every_kind(ids: Any) -> None:
    out = check_ids("ids", ids)
    assert out.dtype == np.int64 and out.tolist() == [1, 2, 3]


def test_id_list_count_boundaries() -> None:
    assert len(check_ids("ids", range(MAX_IDS))) == MAX_IDS
    with pytest.raises(ParameterError) as info:
        check_ids("ids", range(MAX_IDS + 1))
    assert str(info.value) == f"ids must hold 1 to {MAX_IDS} ids, got {MAX_IDS + 1}"
    with pytest.raises(ParameterError) as info:
        check_ids("ids", [])
    assert str(info.value) == f"ids must hold 1 to {MAX_IDS} ids, got 0"
    assert check_ids("ids", [], allow_empty=True).tolist() == []
    with pytest.raises(ParameterError, match=f"^chunk_ids must hold 0 to {MAX_IDS} ids, got {MAX_IDS + 1}$"):
        check_ids("chunk_ids", [0] * (MAX_IDS + 1), allow_empty=True, unique=False)


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ([1, -1], f"ids[1] must be in {INT_RANGE}, got -1"),
        ([MAX_ID + 1], f"ids[0] must be in {INT_RANGE}, got {MAX_ID + 1}"),
        ([1, "a"], f"ids[1] must be an int in {INT_RANGE}, got 'a'"),
        ([True], f"ids[0] must be an int in {INT_RANGE}, got True"),
        ([1, 2.0], f"ids[1] must be an int in {INT_RANGE}, got 2.0"),
        ("12", f"ids must be a list of 1 to {MAX_IDS} ints in {INT_RANGE}, got '12'"),
        (7, f"ids must be a list of 1 to {MAX_IDS} ints in {INT_RANGE}, got 7"),
        ({1: 2}, f"ids must be a list of 1 to {MAX_IDS} ints in {INT_RANGE}, got {{1: 2}}"),
        (np.array([[1, 2]]), f"ids must be a list of 1 to {MAX_IDS} ints in {INT_RANGE}"),
        (np.array([1.0]), f"ids must be a list of 1 to {MAX_IDS} ints in {INT_RANGE}"),
    ],
)
def test_bad_id_lists_name_the_element_and_range(ids: Any, message: str) -> None:
    with pytest.raises(ParameterError) as info:
        check_ids("ids", ids)
    assert str(info.value).startswith(message)


def test_repeats_rows_and_order() -> None:
    with pytest.raises(ParameterError, match=r"^ids must not repeat an id, got repeated ids \[2\]$"):
        check_ids("ids", [2, 1, 2])
    assert check_ids("ids", [3, 1, 3, 2, 1], unique=False).tolist() == [3, 1, 2]
    with pytest.raises(ParameterError, match=r"^ids must hold one id per row \(3\), got 2 ids$"):
        check_ids("ids", [1, 2], rows=3)


# -- filter_dict ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        (None, None),
        ({}, None),
        ({"document_id": []}, []),
        ({"document_id": [3, 1, 3]}, [1, 3]),
        ({"document_id": (2, 1)}, [1, 2]),
        ({"document_id": {5}}, [5]),
        ({"document_id": np.array([4, 0])}, [0, 4]),
        ({"document_id": [np.int64(9), MAX_ID]}, [9, MAX_ID]),
    ],
)
def test_filter_accepts(value: Any, ids: list[int] | None) -> None:
    assert check_filter(value) == ids


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "filter_dict must be None or a dict like"),  # a falsy non-dict is not "no filter"
        (0, "filter_dict must be None or a dict like"),
        ("", "filter_dict must be None or a dict like"),
        ({"doc_id": [1]}, "filter_dict keys must be in ['document_id'], got unsupported keys ['doc_id']"),
        ({f"k{i}": [] for i in range(33)}, "filter_dict must have at most 32 keys, got 33"),
        ({"document_id": "1"}, f"filter_dict['document_id'] must be a list of 0 to {MAX_IDS} ints in {INT_RANGE}"),
        ({"document_id": 1}, f"filter_dict['document_id'] must be a list of 0 to {MAX_IDS} ints"),
        ({"document_id": [1, -2]}, f"filter_dict['document_id'][1] must be in {INT_RANGE}, got -2"),
        ({"document_id": [None]}, f"filter_dict['document_id'][0] must be an int in {INT_RANGE}, got None"),
        ({"document_id": [False]}, f"filter_dict['document_id'][0] must be an int in {INT_RANGE}, got False"),
    ],
)
def test_filter_refuses(value: Any, message: str) -> None:
    with pytest.raises(ParameterError) as info:
        check_filter(value)
    assert str(info.value).startswith(message)


def test_filter_id_count_boundary() -> None:
    assert len(check_filter({"document_id": list(range(MAX_IDS))}) or []) == MAX_IDS
    with pytest.raises(ParameterError) as info:
        check_filter({"document_id": list(range(MAX_IDS + 1))})
    assert str(info.value) == f"filter_dict['document_id'] must hold 0 to {MAX_IDS} ids, got {MAX_IDS + 1}"


# -- the stores use them -------------------------------------------------------------------------


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[SQLiteDocstore, Any]]:
    faiss_npu = pytest.importorskip("mx_rag.storage.vectorstore.faiss_npu")
    pytest.importorskip("faiss")
    docstore = SQLiteDocstore(db_path=tmp_path / "sql.db")
    vectors = faiss_npu.MindFAISS(x_dim=4)
    docstore.add([MxDocument("apt installs packages")], document_id=1)
    vectors.add([1], np.eye(4, dtype=np.float32)[:1], document_id=1)
    try:
        yield docstore, vectors
    finally:
        docstore.close()


def _message(call: Any) -> str:
    with pytest.raises(ParameterError) as info:
        call()
    return str(info.value)


BAD_FILTERS = [
    [],
    {"doc_id": [1]},
    {"document_id": "1"},
    {"document_id": [1, -1]},
    {"document_id": list(range(MAX_IDS + 1))},
]


@pytest.mark.parametrize("bad", BAD_FILTERS, ids=["list", "unknown key", "str ids", "negative", "too many"])
def test_both_stores_refuse_a_filter_alike(stores: tuple[SQLiteDocstore, Any], bad: Any) -> None:
    docstore, vectors = stores
    expected = _message(lambda: check_filter(bad))
    assert _message(lambda: docstore.full_text_search("packages", filter_dict=bad)) == expected
    assert _message(lambda: vectors.search(np.eye(4, dtype=np.float32)[:1], k=1, filter_dict=bad)) == expected


def test_both_stores_take_the_same_filter_kinds(stores: tuple[SQLiteDocstore, Any]) -> None:
    docstore, vectors = stores
    for ok in ({"document_id": (1,)}, {"document_id": np.array([1])}, {"document_id": [np.int64(1)]}):
        assert [d.chunk_id for d in docstore.full_text_search("packages", filter_dict=ok)] == [1]
        assert vectors.search(np.eye(4, dtype=np.float32)[:1], k=1, filter_dict=ok)[1] == [[1]]


@pytest.mark.parametrize("k", [0, MAX_TOP_K + 1, 2.5])
def test_both_stores_bound_top_k_alike(stores: tuple[SQLiteDocstore, Any], k: Any) -> None:
    docstore, vectors = stores
    assert _message(lambda: docstore.full_text_search("packages", top_k=k)) == _message(lambda: check_top_k(k))
    assert _message(lambda: vectors.search(np.eye(4, dtype=np.float32)[:1], k=k)) == _message(lambda: check_k(k))
    assert len(docstore.full_text_search("packages", top_k=MAX_TOP_K)) == 1


def test_both_stores_bound_id_lists_alike(stores: tuple[SQLiteDocstore, Any]) -> None:
    docstore, vectors = stores
    too_many = list(range(MAX_IDS + 1))
    assert _message(lambda: docstore.search_many(too_many)).endswith(f"0 to {MAX_IDS} ids, got {MAX_IDS + 1}")
    assert _message(lambda: vectors.delete(too_many)).endswith(f"0 to {MAX_IDS} ids, got {MAX_IDS + 1}")
    repeated = "chunk_ids must not repeat an id, got repeated ids [1]"
    assert _message(lambda: docstore.update([1, 1], ["a", "b"])) == repeated
    assert _message(lambda: docstore.search_many([1, -1])) == f"chunk_ids[1] must be in {INT_RANGE}, got -1"
    assert _message(lambda: vectors.delete([1, -1])) == f"ids[1] must be in {INT_RANGE}, got -1"
