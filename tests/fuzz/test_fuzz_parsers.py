"""The retrieval-API response parsers and graph extraction's JSON repair, fed arbitrary input.

``normalize_retrieve_api_results`` reads any parsed JSON value: documents or nothing, never
``TypeError``/``KeyError``/``AttributeError``. ``RetrievalApiClient.retrieve`` reads any response
body from a real HTTP server (``ScriptedServer``): documents, or ``[]`` for a failing answer.
``loads_tolerant`` reads any text: a dict or list, or ``ValueError`` (what graph extraction
catches); truncated and mutated real extraction answers keep their complete members.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fuzz_helpers import fuzz
from hypothesis import event, given
from hypothesis import strategies as st

from mx_rag.corag.retrieval_api import NO_ID, RetrievalApiClient, normalize_retrieve_api_results
from mx_rag.corag.types import RetrievedDocument
from mx_rag.errors import MxRagError, RetrievalError
from mx_rag.graphrag.json_repair import loads_tolerant
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam

pytestmark = pytest.mark.timeout(300)

# -- retrieval API ---------------------------------------------------------------------------------

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                     st.dictionaries(st.text(max_size=10), inner, max_size=5)),
                    max_leaves=15)
KEYS = ["document_ids", "documents", "chunks", "data", "results", "docs", "passages",
        "id", "doc_id", "contents", "content", "text"]
# near misses: the documented keys with values of any type, items of any type
ITEM = st.one_of(JSON, st.dictionaries(st.sampled_from(KEYS), JSON, max_size=4))
SHAPE = st.one_of(
    JSON,
    st.lists(ITEM, max_size=6),
    st.dictionaries(st.sampled_from(KEYS), st.one_of(JSON, st.lists(ITEM, max_size=6)), max_size=4),
)


def _check_documents(docs: Any) -> list[RetrievedDocument]:
    assert isinstance(docs, list)
    for doc in docs:
        assert isinstance(doc, RetrievedDocument)
        assert isinstance(doc.id, str) and doc.id
        assert isinstance(doc.text, str) and doc.text.strip()
    return docs


@fuzz(60)
@given(data=SHAPE)
def test_any_json_value_gives_documents_or_none(data: Any) -> None:
    docs = _check_documents(normalize_retrieve_api_results(data))
    event("documents" if docs else "no documents")


@fuzz(100)
@given(texts=st.lists(st.text(min_size=1, max_size=10).filter(str.strip), min_size=1, max_size=4),
       shape=st.sampled_from(["format1", "chunks", "data", "results", "docs", "passages", "list"]))
def test_each_documented_shape_gives_its_texts_in_order(texts: list[str], shape: str) -> None:
    ids = [f"d{i}" for i in range(len(texts))]
    data: Any = {
        "format1": {"document_ids": ids, "documents": texts},
        "chunks": {"chunks": texts},
        "data": {"data": [{"id": i, "content": t} for i, t in zip(ids, texts, strict=True)]},
        "results": {"results": [{"doc_id": i, "text": t} for i, t in zip(ids, texts, strict=True)]},
        "docs": {"docs": [{"id": i, "contents": t} for i, t in zip(ids, texts, strict=True)]},
        "passages": {"passages": [{"id": i, "content": t} for i, t in zip(ids, texts, strict=True)]},
        "list": texts,
    }[shape]
    docs = _check_documents(normalize_retrieve_api_results(json.loads(json.dumps(data))))
    assert [doc.text for doc in docs] == texts
    assert [doc.id for doc in docs] == (ids if shape not in ("chunks", "list") else [NO_ID] * len(texts))


@pytest.fixture(scope="module")
def api() -> Iterator[tuple[ScriptedServer, RetrievalApiClient]]:
    with ScriptedServer() as server:
        param = ClientParam(use_http=True, retries=0, timeout=10)
        with RetrievalApiClient(server.url("/retrieve"), client_param=param, top_k=5) as client:
            yield server, client


BODIES = st.one_of(
    SHAPE.map(lambda value: json.dumps(value).encode()),
    st.binary(max_size=200),
    st.sampled_from([b"", b"{", b"[" * 100_000, b'{"chunks": ' * 50_000, b"\xff\xfe{}", b"NaN", b"1e999999",
                     b'{"chunks": ["' + b"1" * 5000 + b'"]}', b"9" * 5000]),
)


@fuzz(60)
@given(body=BODIES, status=st.sampled_from([200, 200, 200, 201, 404, 500]))
def test_any_response_body_gives_documents_or_an_error(api: tuple[ScriptedServer, RetrievalApiClient],
                                                      body: bytes, status: int) -> None:
    server, client = api
    server.reset()
    server.enqueue(Reply.raw(body, status=status, content_type="application/json"))
    try:
        docs = _check_documents(client.retrieve("who?", top_k=3))
    except RetrievalError as exc:  # a failed or malformed answer is an error with its cause, one line
        assert isinstance(exc.__cause__, MxRagError) and "\n" not in str(exc), repr(exc)
        event("refused")
        return
    assert len(docs) <= 3
    event("documents" if docs else "no documents")


# -- JSON repair ---------------------------------------------------------------------------------------

EXTRACTION = {
    "entities": [{"name": "Ada Lovelace", "type": "person"}, {"name": "Analytical Engine", "type": "machine"},
                 {"name": "巴贝奇", "type": "人物"}],
    "relations": [{"head": "Ada Lovelace", "relation": "wrote notes on", "tail": "Analytical Engine"},
                  ["巴贝奇", "设计", "Analytical Engine"]],
}
ANSWERS = [
    json.dumps(EXTRACTION),
    json.dumps(EXTRACTION, ensure_ascii=False, indent=2),
    "Here is the JSON:\n```json\n" + json.dumps(EXTRACTION, ensure_ascii=False) + "\n```\nDone.",
    json.dumps(EXTRACTION["relations"], ensure_ascii=False).replace('"', "'"),
    "{entities: [{name: Ada, type: person},], relations: [[Ada, knows, Babbage]],}",
]
JUNK = ["{", "}", "[", "]", '"', "'", ",", ":", "，", "：", "“", "”", "\\", "\\u12", "//", "/*", "#", "\n",
        "True", "None", "```", "1e999", "-", "9" * 5000, "{" * 300, "[" * 300, '"' * 300]


def _check_repair(text: str) -> Any:
    try:
        value = loads_tolerant(text)
    except ValueError as exc:
        assert "\n" not in str(exc)
        event("ValueError")
        return None
    assert isinstance(value, (dict, list))
    event(type(value).__name__)
    return value


@fuzz(200)
@given(text=st.text(max_size=500))
def test_any_text_gives_json_or_value_error(text: str) -> None:
    _check_repair(text)


@fuzz(150)
@given(answer=st.sampled_from(ANSWERS), cut=st.integers(0, 10_000),
       edits=st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(JUNK), st.booleans()), max_size=4))
def test_truncated_and_mutated_answers_give_json_or_value_error(answer: str, cut: int,
                                                                edits: list[tuple[int, str, bool]]) -> None:
    text = answer
    for at, junk, replace in edits:
        at %= len(text) + 1
        text = text[:at] + junk + text[at + (1 if replace else 0):]
    text = text[: cut % (len(text) + 1)]
    _check_repair(text)


@fuzz(100)
@given(answer=st.sampled_from(ANSWERS[:3]), cut=st.integers(0, 10_000))
def test_a_cut_answer_keeps_only_complete_entities(answer: str, cut: int) -> None:
    value = _check_repair(answer[: cut % (len(answer) + 1)])
    if isinstance(value, dict):
        for entity in value.get("entities", []):
            assert entity in EXTRACTION["entities"] or not isinstance(entity, dict) or set(entity) <= {"name", "type"}
