"""Constructors' documented limits, fuzzed: out of range or of the wrong type gives a one-line
``ParameterError`` naming the parameter; in range is accepted.

Each target draws one argument from a mix of ints (near the bounds and far), floats (infinities
included), bools, None, strings and lists, and compares the outcome with the documented range.
Two holes were found here: every numeric check accepted NaN (``check_number``: ``nan < low`` and
``nan > high`` are both false; fixed, ``test_nan_is_refused``), and ``Retriever(filter_dict=0)``
(any falsy value) was taken for "no filter" (fixed by the shared ``check_filter`` of
``mx_rag/storage/validation.py``: only None and ``{}`` mean no filter).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_helpers import check_message, fuzz
from hypothesis import given
from hypothesis import strategies as st

from mx_rag.chain import SingleText2TextChain
from mx_rag.embedding.local import TextEmbedding
from mx_rag.errors import ParameterError
from mx_rag.knowledge import KnowledgeStore
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.retrievers import Retriever
from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.utils import ClientParam

pytestmark = pytest.mark.timeout(300)


def _near(*bounds: float) -> st.SearchStrategy[Any]:
    """Values at and around the bounds, ints and floats."""
    points = [b + d for b in bounds for d in (-1, -0.5, -1e-9, 0, 1e-9, 0.5, 1) if math.isfinite(b + d)]
    return st.one_of(st.sampled_from(points), st.sampled_from([int(p) for p in points]))


ANY = st.one_of(
    st.integers(-(2**40), 2**40), st.floats(allow_nan=False), st.booleans(), st.none(), st.text(max_size=4),
    st.lists(st.integers(0, 3), max_size=2), st.just(10**30), st.just(float("inf")), st.just(-float("inf")),
)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def in_closed(low: float, high: float, integer: bool = False) -> Callable[[Any], bool]:
    return lambda v: (_int(v) if integer else _number(v)) and low <= v <= high


def in_open_closed(low: float, high: float) -> Callable[[Any], bool]:
    return lambda v: _number(v) and low < v <= high


def optional(valid: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or valid(v)


def is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def check(build: Callable[[Any], Any], name: str, value: Any, valid: bool) -> None:
    """``build(value)`` succeeds when ``valid``, else raises ParameterError naming ``name``."""
    if valid:
        build(value)
        return
    with pytest.raises(ParameterError) as info:
        build(value)
    message = check_message(info.value)
    assert name in message, message


# -- LLMParameterConfig and ClientParam: plain values ---------------------------------------------

LLM_FIELDS: dict[str, tuple[Callable[[Any], bool], st.SearchStrategy[Any]]] = {
    "max_tokens": (in_closed(1, 100_000, integer=True), _near(1, 100_000)),
    "presence_penalty": (in_closed(-2.0, 2.0), _near(-2.0, 2.0)),
    "frequency_penalty": (in_closed(-2.0, 2.0), _near(-2.0, 2.0)),
    "temperature": (in_closed(0.0, 2.0), _near(0.0, 2.0)),
    "top_p": (in_open_closed(0.0, 1.0), _near(0.0, 1.0)),
    "seed": (optional(in_closed(0, 2**31 - 1, integer=True)), _near(0, 2**31 - 1)),
    "stream": (is_bool, st.booleans()),
}
CLIENT_FIELDS: dict[str, tuple[Callable[[Any], bool], st.SearchStrategy[Any]]] = {
    "use_http": (is_bool, st.booleans()),
    "timeout": (in_open_closed(0, 600), _near(0, 600)),
    "response_limit_size": (in_closed(1, 10 * 2**20, integer=True), _near(1, 10 * 2**20)),
    "connect_timeout": (optional(in_open_closed(0, 600)), _near(0, 600)),
    "deadline": (optional(in_open_closed(0, 24 * 3600)), _near(0, 24 * 3600)),
    "retries": (in_closed(0, 10, integer=True), _near(0, 10)),
    "backoff": (in_closed(0, 60), _near(0, 60)),
}


def _field_values(fields: dict[str, tuple[Callable[[Any], bool], st.SearchStrategy[Any]]]) -> Any:
    return st.sampled_from(sorted(fields)).flatmap(lambda name: st.tuples(st.just(name), st.one_of(fields[name][1],
                                                                                                     ANY)))


@fuzz(100)
@given(field=_field_values(LLM_FIELDS))
def test_llm_parameter_config_limits(field: tuple[str, Any]) -> None:
    name, value = field
    check(lambda v: LLMParameterConfig(**{name: v}), name, value, LLM_FIELDS[name][0](value))
    config = LLMParameterConfig()
    check(lambda v: setattr(config, name, v), name, value, LLM_FIELDS[name][0](value))  # assignment too


@fuzz(100)
@given(field=_field_values(CLIENT_FIELDS))
def test_client_param_limits(field: tuple[str, Any]) -> None:
    name, value = field
    check(lambda v: ClientParam(**{name: v}), name, value, CLIENT_FIELDS[name][0](value))


def _headers_valid(headers: Any) -> bool:
    """The documented headers: a mapping of at most 100 str names (1 to 100 characters) to str
    values (at most 1000), without CR, LF or NUL."""
    return isinstance(headers, dict) and len(headers) <= 100 and all(
        isinstance(k, str) and isinstance(v, str) and 1 <= len(k) <= 100 and len(v) <= 1000
        and not any(c in k + v for c in "\r\n\0") for k, v in headers.items())


@fuzz(40)
@given(headers=st.one_of(st.dictionaries(st.text(max_size=3), st.one_of(st.text(max_size=3), st.integers()),
                                         max_size=3), ANY, st.just({f"X-{i}": "v" for i in range(101)}),
                         st.just({"X": "a\r\nInjected: 1"}), st.just({"k" * 101: "v"})))
def test_client_param_headers(headers: Any) -> None:
    check(lambda v: ClientParam(headers=v), "headers", headers, _headers_valid(headers))


@pytest.mark.parametrize("build", [
    lambda: ClientParam(timeout=float("nan")),
    lambda: ClientParam(backoff=float("nan")),
    lambda: LLMParameterConfig(temperature=float("nan")),
    lambda: LLMParameterConfig(top_p=float("nan")),
], ids=["ClientParam.timeout", "ClientParam.backoff", "LLMParameterConfig.temperature", "LLMParameterConfig.top_p"])
def test_nan_is_refused(build: Callable[[], Any]) -> None:
    with pytest.raises(ParameterError):
        build()


# -- stores, retriever, embedding, chain --------------------------------------------------------------


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MindFAISS, SQLiteDocstore, Path]]:
    directory = tmp_path_factory.mktemp("stores")
    docstore = SQLiteDocstore(db_path=str(directory / "chunks.db"))
    yield MindFAISS(x_dim=4), docstore, directory


FAISS_FIELDS: dict[str, tuple[Callable[[Any], bool], st.SearchStrategy[Any]]] = {
    "x_dim": (in_closed(1, 2**20, integer=True), _near(1, 2**20)),
    "index_type": (lambda v: v in ("FLAT", "HNSW", "IVF"), st.sampled_from(["FLAT", "HNSW", "IVF", "flat", "PQ"])),
    "metric_type": (lambda v: v in ("IP", "L2", "COSINE"), st.sampled_from(["IP", "L2", "COSINE", "ip", "DOT"])),
    "auto_save": (is_bool, st.booleans()),
    "devs": (lambda v: v is None or (isinstance(v, list) and len(v) == 1 and in_closed(0, 63, integer=True)(v[0])),
             st.one_of(st.none(), st.lists(st.integers(-2, 70), max_size=2))),
}


@fuzz(60)
@given(field=_field_values(FAISS_FIELDS))
def test_mindfaiss_limits(field: tuple[str, Any]) -> None:
    name, value = field
    arguments = {"x_dim": 4, name: value}
    check(lambda v: MindFAISS(**arguments), name if name != "devs" else "devs", value, FAISS_FIELDS[name][0](value))


BAD_PATHS = st.one_of(st.none(), st.integers(), st.just(""), st.just("a\x00b.db"), st.just("x" * 5000),
                      st.just("../escape.db"), st.lists(st.text(max_size=2), max_size=1))


@fuzz(20)
@given(path=BAD_PATHS, which=st.sampled_from(["SQLiteDocstore", "KnowledgeStore"]))
def test_database_paths_are_checked(stores: tuple[MindFAISS, SQLiteDocstore, Path], path: Any, which: str) -> None:
    build = SQLiteDocstore if which == "SQLiteDocstore" else KnowledgeStore
    check(lambda v: build(db_path=v), "db_path", path, valid=False)


@pytest.mark.parametrize("which", ["SQLiteDocstore", "KnowledgeStore"])
def test_database_paths_in_range_are_accepted(tmp_path: Path, which: str) -> None:
    build = SQLiteDocstore if which == "SQLiteDocstore" else KnowledgeStore
    check(lambda v: build(db_path=v), "db_path", str(tmp_path / "ok.db"), valid=True)
    assert (tmp_path / "ok.db").exists()
    check(lambda v: build(db_path=v), "db_path", str(tmp_path), valid=False)  # a directory


RETRIEVER_FIELDS: dict[str, tuple[Callable[[Any], bool], st.SearchStrategy[Any]]] = {
    "k": (in_closed(1, 10_000, integer=True), _near(1, 10_000)),
    "score_threshold": (optional(in_closed(0.0, 1.0)), _near(0.0, 1.0)),
    "filter_dict": (lambda v: v is None or v == {} or (isinstance(v, dict) and set(v) == {"document_id"}
                                                      and isinstance(v["document_id"], list)
                                                      and all(_int(i) and i >= 0 for i in v["document_id"])),
                    st.one_of(st.just({}), st.just({"document_id": [1, 2]}), st.just({"other": [1]}),
                              st.just({"document_id": "1"}))),
}


@fuzz(80)
@given(field=_field_values(RETRIEVER_FIELDS))
def test_retriever_limits(stores: tuple[MindFAISS, SQLiteDocstore, Path], field: tuple[str, Any]) -> None:
    faiss_store, docstore, _ = stores
    name, value = field
    check(lambda v: Retriever(vector_store=faiss_store, document_store=docstore,
                              embed_func=lambda texts: [[1.0, 0, 0, 0]] * len(texts), **{name: v}),
          name, value, RETRIEVER_FIELDS[name][0](value))


@pytest.mark.parametrize("value", [0, False, "", [], 0.0])
def test_retriever_filter_dict_of_a_wrong_type_is_refused(stores: tuple[MindFAISS, SQLiteDocstore, Path],
                                                          value: Any) -> None:
    faiss_store, docstore, _ = stores
    with pytest.raises(ParameterError, match="filter_dict"):
        Retriever(vector_store=faiss_store, document_store=docstore, embed_func=len, filter_dict=value)


EMBEDDING_FIELDS: dict[str, tuple[Callable[[Any], bool], st.SearchStrategy[Any]]] = {
    "dev_id": (in_closed(0, 63, integer=True), _near(0, 63)),
    "use_fp16": (is_bool, st.booleans()),
    "pooling_method": (lambda v: v is None or v in ("cls", "mean", "max", "lasttoken"),
                       st.sampled_from(["cls", "mean", "max", "lasttoken", "CLS", "sum"])),
    # at most 131,072, and at most the model's positions: 512 for the built-in all-MiniLM-L6-v2
    "max_length": (optional(in_closed(1, 512, integer=True)), _near(1, 512, 131_072)),
}


@fuzz(80)
@given(field=_field_values(EMBEDDING_FIELDS))
def test_text_embedding_limits_without_loading_a_model(field: tuple[str, Any]) -> None:
    name, value = field
    check(lambda v: TextEmbedding("all-MiniLM-L6-v2", **{name: v}), name, value, EMBEDDING_FIELDS[name][0](value))


@pytest.fixture(scope="module")
def chain_parts(stores: tuple[MindFAISS, SQLiteDocstore, Path]) -> tuple[Text2TextLLM, Retriever]:
    faiss_store, docstore, _ = stores
    llm = Text2TextLLM(base_url="http://127.0.0.1:9/v1/chat/completions", model_name="m",
                       client_param=ClientParam(use_http=True, retries=0))
    retriever = Retriever(vector_store=faiss_store, document_store=docstore,
                          embed_func=lambda texts: [[1.0, 0, 0, 0]] * len(texts))
    return llm, retriever


CHAIN_FIELDS: dict[str, tuple[Callable[[Any], bool], st.SearchStrategy[Any]]] = {
    "prompt": (lambda v: isinstance(v, str) and 1 <= len(v) <= 2**20,
               st.sampled_from(["", "p", "x" * 2**20, "x" * (2**20 + 1)])),
    "source": (is_bool, st.booleans()),
    # None or at most 16 dicts of at most 16 str keys (1 to 16 characters); str values up to 4 MiB
    "sys_messages": (lambda v: v is None or (isinstance(v, list) and len(v) <= 16 and all(
        isinstance(m, dict) and len(m) <= 16 and all(isinstance(k, str) and 1 <= len(k) <= 16 for k in m)
        for m in v)),
        st.one_of(st.none(), st.just([]), st.just([{"role": "system", "content": "be brief"}]),
                  st.just([{"role": "system", "content": "x"}] * 17), st.just([{"role": "robot", "content": "x"}]),
                  st.just(["not a dict"]), st.just([{"k" * 17: "x"}]), st.just([{f"k{i}": "x" for i in range(17)}]),
                  st.just([{"": "x"}]))),
}


@fuzz(60)
@given(field=_field_values(CHAIN_FIELDS))
def test_single_text_to_text_chain_limits(chain_parts: tuple[Text2TextLLM, Retriever], field: tuple[str, Any]) -> None:
    llm, retriever = chain_parts
    name, value = field
    check(lambda v: SingleText2TextChain(llm=llm, retriever=retriever, **{name: v}), name, value,
          CHAIN_FIELDS[name][0](value))
