# SPDX-License-Identifier: Apache-2.0
"""Collection layout and row conversion of ``MilvusDocstore`` (no pymilvus import).

The layout is the original SDK's, so collections it made open here and the other way round:

=================  ===========================================================================
id                 INT64 primary key: the chunk id, assigned by Milvus (auto_id) on milvus-lite;
                   on a Milvus server taken from Milvus's id allocator through the helper
                   collection ``<name>_id_allocator`` and written by the store (auto_id off), so
                   that upserts (``update``) keep it
document_id        INT64
page_content       VARCHAR(65535 bytes); with BM25 analysed by jieba + ``cnalphanumonly``
document_name      VARCHAR(1024)
metadata           JSON
sparse_vector      SPARSE_FLOAT_VECTOR: the BM25 function's output (index metric BM25), or,
                   without BM25, a constant placeholder (a Milvus collection needs a vector field)
placeholder_vector FLOAT_VECTOR(2), in place of ``sparse_vector`` on Milvus 2.3 (no sparse
                   vectors; BM25 off): the constant ``[0.1, 0.3]``
=================  ===========================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from mx_rag.errors import ParameterError
from mx_rag.storage.document_store.chunk_rows import ChunkCodec
from mx_rag.utils.checks import fail

MAX_CONTENT_BYTES = 65535  # Milvus's largest VARCHAR
MAX_NAME = 1024
FIELDS = ["id", "document_id", "page_content", "document_name", "metadata"]
# Milvus 2.5's built-in "chinese" analyzer, spelled out: milvus-lite knows the parts, not the name.
CHINESE_ANALYZER = {"tokenizer": "jieba", "filter": ["cnalphanumonly"]}
PLACEHOLDER_VECTOR = {1: 0.1, 2: 0.3}  # the original's vector for rows of a store without BM25
DENSE_FIELD = "placeholder_vector"  # Milvus 2.3: a dense placeholder, as it has no sparse vectors
DENSE_PLACEHOLDER = [0.1, 0.3]
ALLOCATOR_SUFFIX = "_id_allocator"


class MilvusRow(NamedTuple):
    """A queried row in the shape ``ChunkCodec.to_document`` reads."""

    chunk_id: int
    document_id: int
    document_name: str
    chunk_content: str
    chunk_metadata: dict[str, Any] | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> MilvusRow:
        return cls(int(row["id"]), int(row["document_id"]), str(row.get("document_name") or ""),
                   str(row.get("page_content") or ""), row.get("metadata"))


def utf8_length(name: str, text: str) -> int:
    """The UTF-8 length of ``text``; a lone surrogate is a ``ParameterError`` naming ``name``."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ParameterError(f"{name}: the text holds characters UTF-8 cannot encode ({exc.reason})") from exc


def check_content(name: str, stored: str) -> str:
    size = utf8_length(name, stored)
    if size > MAX_CONTENT_BYTES:
        raise ParameterError(f"{name} must be at most {MAX_CONTENT_BYTES} bytes in UTF-8 (a Milvus VARCHAR), "
                             f"got {size} bytes")
    return stored


def add_placeholder(row: dict[str, Any], dense: bool) -> dict[str, Any]:
    """``row`` with the constant vector of a store without BM25 (dense on Milvus 2.3)."""
    if dense:
        row[DENSE_FIELD] = DENSE_PLACEHOLDER
    else:
        row["sparse_vector"] = PLACEHOLDER_VECTOR
    return row


def make_rows(codec: ChunkCodec, documents: Any, document_id: int, bm25: bool,
              dense: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """Insert rows of validated chunks (text encrypted by ``codec`` where it encrypts)."""
    rows: list[dict[str, Any]] = []
    for i, doc in enumerate(documents):
        params = codec.row_params(i, doc, document_id)
        utf8_length(f"documents[{i}].document_name", params["document_name"])
        row = {
            "document_id": document_id,
            "page_content": check_content(f"documents[{i}].page_content", params["chunk_content"]),
            "document_name": params["document_name"],
            "metadata": params["chunk_metadata"],
        }
        rows.append(row if bm25 else add_placeholder(row, dense))
    return rows


def build_schema(client: Any, types: Any, function_cls: Any, function_types: Any, *, bm25: bool,
                 k1: float, b: float, auto_id: bool = True, dense: bool = False) -> tuple[Any, Any]:
    """The collection schema and its index parameters (``dense``: Milvus 2.3's placeholder)."""
    schema = client.create_schema(auto_id=auto_id, enable_dynamic_field=False)
    schema.add_field("id", types.INT64, is_primary=True)
    schema.add_field("document_id", types.INT64)
    analyzer = {"enable_analyzer": True, "analyzer_params": CHINESE_ANALYZER} if bm25 else {}
    schema.add_field("page_content", types.VARCHAR, max_length=MAX_CONTENT_BYTES, **analyzer)
    schema.add_field("document_name", types.VARCHAR, max_length=MAX_NAME)
    schema.add_field("metadata", types.JSON)
    indexes = client.prepare_index_params()  # the vector index only, as the original (each costs 0.5 s to create)
    if dense:
        schema.add_field(DENSE_FIELD, types.FLOAT_VECTOR, dim=len(DENSE_PLACEHOLDER))
        indexes.add_index(field_name=DENSE_FIELD, index_type="FLAT", metric_type="L2")
        return schema, indexes
    schema.add_field("sparse_vector", types.SPARSE_FLOAT_VECTOR)
    if bm25:
        schema.add_function(function_cls(name="page_content_bm25", function_type=function_types.BM25,
                                         input_field_names=["page_content"], output_field_names=["sparse_vector"]))
        params = {"inverted_index_algo": "DAAT_MAXSCORE", "bm25_k1": k1, "bm25_b": b}
        indexes.add_index(field_name="sparse_vector", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                          params=params)
    else:
        indexes.add_index(field_name="sparse_vector", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    return schema, indexes


def check_texts(texts: Any, count: int) -> list[str]:
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence) or len(texts) != count:
        raise fail("texts", texts, f"a list of str as long as chunk_ids ({count})")
    return list(texts)


def allocator_schema(client: Any, types: Any) -> Any:
    """The helper collection whose auto ids become chunk ids on a Milvus server (rows are deleted
    as soon as their ids are taken)."""
    schema = client.create_schema(auto_id=True, enable_dynamic_field=False)
    schema.add_field("id", types.INT64, is_primary=True)
    schema.add_field("v", types.FLOAT_VECTOR, dim=len(DENSE_PLACEHOLDER))
    return schema
