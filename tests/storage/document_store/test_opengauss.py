# SPDX-License-Identifier: Apache-2.0
"""OpenGaussDocstore on PostgreSQL with pgvector (openGauss speaks its protocol): the document-store
conformance suite, then enable_bm25, index_name, encryption and drop."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, inspect, make_url, text

from mx_rag.errors import ParameterError
from mx_rag.storage.document_store import MxDocument, OpenGaussDocstore
from mx_rag.testing.document_store import DocstoreConformance, chunks
from tests.storage.document_store.helpers import decrypt, encrypt


@pytest.fixture
def schema_engine(pgvector_engine: Engine, pgvector_url: str) -> Iterator[Callable[[], Engine]]:
    """Engines whose search path is a fresh schema (the store's table name is fixed), dropped afterwards."""
    schema = f"s_{uuid.uuid4().hex[:16]}"
    with pgvector_engine.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    engines: list[Engine] = []

    def make() -> Engine:
        url = make_url(pgvector_url).update_query_dict({"options": f"-csearch_path={schema}"})
        engines.append(create_engine(url))
        return engines[-1]

    yield make
    for engine in engines:
        engine.dispose()
    with pgvector_engine.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))


class TestOpenGaussDocstore(DocstoreConformance):
    @pytest.fixture
    def make_store(self, schema_engine: Callable[[], Engine]) -> Any:
        engine = schema_engine()
        return lambda **kwargs: OpenGaussDocstore(engine=engine, **kwargs)


def test_index_name_and_drop(schema_engine: Callable[[], Engine]) -> None:
    engine = schema_engine()
    store = OpenGaussDocstore(engine=engine, index_name="my-bm25_index")
    assert "my-bm25_index" in {index["name"] for index in inspect(engine).get_indexes("chunks_table")}
    ids = store.add([MxDocument("openGauss 全文检索", {}, "a.md"), MxDocument("其他内容", {}, "a.md")], 4)
    assert [d.chunk_id for d in store.full_text_search("全文检索", filter_dict={"document_id": [4]})] == ids[:1]
    store.drop()
    assert not inspect(engine).has_table("chunks_table")


def test_without_bm25_search_returns_nothing_and_encryption_is_allowed(schema_engine: Callable[[], Engine]) -> None:
    engine = schema_engine()
    with pytest.raises(ParameterError, match="enable_bm25=False"):
        OpenGaussDocstore(engine=engine, encrypt_fn=encrypt, decrypt_fn=decrypt)
    store = OpenGaussDocstore(engine=engine, encrypt_fn=encrypt, decrypt_fn=decrypt, enable_bm25=False)
    ids = store.add(chunks(2), 1)
    assert store.full_text_search("chunk") == []
    with pytest.raises(ParameterError, match="top_k"):
        store.full_text_search("chunk", top_k=0)
    assert store.search(ids[1]).page_content == "chunk 1 text"  # type: ignore[union-attr]
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT chunk_content FROM chunks_table ORDER BY chunk_id")).scalars().all()
    assert stored == [encrypt("chunk 0 text"), encrypt("chunk 1 text")]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"index_name": "short"}, "index_name"), ({"index_name": "bad name!"}, "index_name"),
     ({"enable_bm25": 1}, "enable_bm25"), ({"engine": "postgresql://x"}, "engine")],
)
def test_bad_constructor_arguments(schema_engine: Callable[[], Engine], kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        OpenGaussDocstore(**{"engine": schema_engine(), **kwargs})


def test_sqlite_engine_is_refused(tmp_path: Any) -> None:
    with pytest.raises(ParameterError, match="engine"):
        OpenGaussDocstore(engine=create_engine(f"sqlite:///{tmp_path / 'x.db'}"))


def test_reference_example(schema_engine: Callable[[], Engine], capsys: pytest.CaptureFixture[str]) -> None:
    """databases.md's OpenGaussDocstore example with the engine on PostgreSQL. Its encrypt_fn with
    the default enable_bm25 is refused (see docs/differences.md), so the example passes enable_bm25=False."""

    def encrypt_fn(value: str) -> str:
        return value

    def decrypt_fn(value: str) -> str:
        return value

    engine = schema_engine()
    with pytest.raises(ParameterError, match="enable_bm25"):
        OpenGaussDocstore(engine=engine, encrypt_fn=encrypt_fn, decrypt_fn=decrypt_fn)
    chunk_store = OpenGaussDocstore(engine=engine, encrypt_fn=encrypt_fn, decrypt_fn=decrypt_fn, enable_bm25=False)
    texts = ["示例", "文本"]
    metadatas: list[dict[str, Any]] = [{} for _ in texts]
    pairs = zip(texts, metadatas, strict=True)
    doc = [MxDocument(page_content=t, metadata=m, document_name="1.docx") for t, m in pairs]
    document_id = 1
    chunk_store.add(doc, document_id)
    idx = chunk_store.get_all_chunk_id()
    document = chunk_store.search(idx[0])
    print(document.page_content)  # type: ignore[union-attr]
    print(chunk_store.full_text_search("文本", filter_dict={"document_id": [0]}))
    print(chunk_store.full_text_search("文本", filter_dict={"document_id": [document_id]}))
    chunk_store.update(idx[:2], ["text1", "text2"])
    print(chunk_store.delete(document_id))
    assert chunk_store.search_by_document_id(document_id) == []
    assert capsys.readouterr().out == f"示例\n[]\n[]\n{idx}\n"
    with_bm25 = OpenGaussDocstore(engine=schema_engine())  # and the search itself, on the default store
    with_bm25.add(doc, document_id)
    assert [d.page_content for d in with_bm25.full_text_search("文本", filter_dict={"document_id": [1]})] == ["文本"]


def test_chunk_model_reads_the_stores_table(schema_engine: Callable[[], Engine], tmp_path: Any) -> None:
    """ChunkModel maps the table of the SQL stores (here OpenGaussDocstore's and SQLiteDocstore's)."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from mx_rag.storage.document_store import ChunkModel, SQLiteDocstore

    engine = schema_engine()
    for store in (OpenGaussDocstore(engine=engine), SQLiteDocstore(db_path=tmp_path / "sql.db")):
        ids = store.add([MxDocument("甲", {"p": 1}, "a.md"), MxDocument("乙", {}, "b.md")], 5)
        with Session(store.engine) as session:
            rows = session.scalars(select(ChunkModel).order_by(ChunkModel.chunk_id)).all()
            assert [(r.chunk_id, r.document_id, r.document_name, r.chunk_content, r.chunk_metadata) for r in rows] == [
                (ids[0], 5, "a.md", "甲", {"p": 1}), (ids[1], 5, "b.md", "乙", {})]


# openGauss's BM25 (full_text="bm25", chosen by default on openGauss). PostgreSQL has neither the
# bm25 index method nor the <&> operator: the test gives its schema a <&> of its own (ts_rank of
# the chunk against an OR of the query's words, 0 without any) and an ordinary index under
# index_name, so that PostgreSQL runs the store's own SQL. What only a real openGauss can show
# (that it accepts CREATE INDEX ... USING bm25, and its BM25 scores) is not tested here.
_STANDIN = """
CREATE FUNCTION bm25_standin(text, text) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN to_tsvector('simple', $1) @@ q THEN ts_rank(to_tsvector('simple', $1), q)::float8 ELSE 0 END
  FROM to_tsquery('simple', replace(trim($2), ' ', ' | ')) AS q $$;
CREATE OPERATOR <&> (LEFTARG = text, RIGHTARG = text, FUNCTION = bm25_standin);
"""


def test_the_opengauss_bm25_path_on_postgresql(schema_engine: Callable[[], Engine]) -> None:
    from mx_rag.errors import StorageError

    engine = schema_engine()
    with pytest.raises(StorageError, match='access method "bm25" does not exist'):
        OpenGaussDocstore(engine=engine, index_name="chunks_bm25_idx", full_text="bm25")  # CREATE INDEX ... USING bm25
    OpenGaussDocstore(engine=engine, enable_bm25=False, full_text="tsvector")  # makes the table
    with engine.begin() as conn:
        conn.execute(text(_STANDIN))
        conn.execute(text('CREATE INDEX "chunks_bm25_idx" ON chunks_table (document_id)'))
    store = OpenGaussDocstore(engine=engine, index_name="chunks_bm25_idx", full_text="bm25")  # finds its index
    ids = store.add([MxDocument("openGauss 全文检索 检索", {}, "a.md"), MxDocument("其他 内容", {}, "a.md")], 1)
    ids += store.add([MxDocument("全文检索 还有 很多 其他 词语", {"k": 1}, "b.md")], 2)
    found = store.full_text_search("全文检索")
    assert [d.chunk_id for d in found] == [ids[0], ids[2]]  # the unmatched chunk (score 0) is left out
    assert found[0].metadata["score"] > found[1].metadata["score"] > 0
    assert found[1].metadata["retrieval_type"] == "sparse" and found[1].metadata["k"] == 1
    assert [d.chunk_id for d in store.full_text_search("全文检索", filter_dict={"document_id": [2]})] == [ids[2]]
    store.update([ids[1]], ["全文检索 内容"])
    assert ids[1] in {d.chunk_id for d in store.full_text_search("全文检索", top_k=5)}
    with engine.connect() as conn:  # the SET LOCALs of a search end with its transaction
        assert conn.execute(text("SHOW enable_seqscan")).scalar() == "on"
    with pytest.raises(ParameterError, match="full_text"):
        OpenGaussDocstore(engine=engine, full_text="bm24")
