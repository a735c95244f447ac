# SPDX-License-Identifier: Apache-2.0
"""``mx_rag.app``: the typed knowledge errors and what they mean to clients, and the one ingestion
entry point (a graph knowledge base parses each file once). A real ``KnowledgeService`` over
SQLite + FAISS in a temporary folder with the packaged MiniLM; the offline graph extractor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mx_rag.app.errors import kind_of
from mx_rag.app.service import KnowledgeService
from mx_rag.app.settings import load_settings
from mx_rag.app.users import Principal
from mx_rag.errors import (
    KnowledgeConflict,
    KnowledgeError,
    KnowledgeNotFound,
    ParameterError,
    PermissionDenied,
    RemoteError,
    StorageError,
)

OWNER, OTHER = Principal("owner_1", admin=True), Principal("other_1", admin=True)
TEXT = ("Ada Lovelace worked with Charles Babbage on the Analytical Engine in London.\n\n"
        "Charles Babbage was born in London and designed the Difference Engine.\n")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeService]:
    data = tmp_path_factory.mktemp("app")
    made = KnowledgeService(load_settings(data_dir=data, embedding={"model": "all-MiniLM-L6-v2"}))
    try:
        yield made
    finally:
        made.close()


def test_each_refusal_has_its_type_and_keeps_its_message(service: KnowledgeService) -> None:
    service.create(OWNER, "shared")
    with pytest.raises(KnowledgeNotFound, match="does not exist") as missing:
        service.open(OWNER, "nowhere")
    with pytest.raises(KnowledgeConflict, match="already exists") as taken:
        service.create(OTHER, "shared")
    service.registry.add_usr_id_to_knowledge("shared", OTHER.user_id, "member")
    with pytest.raises(PermissionDenied, match="is not an admin") as member:
        service.require_admin(OTHER, "shared")
    with pytest.raises(KnowledgeNotFound, match="has no document 99") as document:
        service.delete_document(OWNER, "shared", 99)
    for raised in (missing, taken, member, document):
        assert isinstance(raised.value, KnowledgeError)


@pytest.mark.parametrize(("error", "status", "code", "shown"), [
    (ParameterError("k"), 400, "invalid_argument", True),
    (KnowledgeNotFound("k"), 404, "not_found", True),
    (KnowledgeConflict("k"), 409, "conflict", True),
    (PermissionDenied("k"), 403, "forbidden", True),
    (KnowledgeError("k"), 400, "knowledge_error", True),
    (RemoteError("llm down"), 502, "upstream_error", True),
    (StorageError("k"), 500, "internal_error", False),
    (RuntimeError("k"), 500, "internal_error", False),
])
def test_errors_are_mapped_by_type_in_one_table(error: Exception, status: int, code: str, shown: bool) -> None:
    kind = kind_of(error)
    assert (kind.status, kind.code, kind.expected, kind.exit_code) == (status, code, shown, 1)


@pytest.mark.slow  # spaCy's model loads for the offline extractor
def test_a_graph_knowledge_base_parses_each_file_once(service: KnowledgeService, tmp_path: Path) -> None:
    pytest.importorskip("spacy")
    service.create(OWNER, "people", graph=True)
    doc = tmp_path / "babbage.txt"
    doc.write_text(TEXT, encoding="utf-8")
    parsed: list[str] = []
    load_and_split = service.loader.load_and_split

    def counting(path: str, *args: Any, **kwargs: Any) -> Any:
        parsed.append(path)
        return load_and_split(path, *args, **kwargs)

    service.loader.load_and_split = counting  # type: ignore[method-assign]
    try:
        report = service.ingest(OWNER, "people", [doc], white_paths=[tmp_path])
        again = service.ingest(OWNER, "people", [doc], white_paths=[tmp_path])
    finally:
        service.loader.load_and_split = load_and_split  # type: ignore[method-assign]
    assert report.added == [str(doc)] and again.unchanged == [str(doc)]
    assert parsed == [str(doc.resolve())]  # once: the graph took the chunks ingestion stored
    graph = service.graph(OWNER, "people")
    assert graph.documents() == [str(doc.resolve())] and graph.pending() == []
    assert graph.graph.count_nodes() > 0
    assert {d["name"] for d in service.describe(OWNER, "people")["documents"]} == {"babbage.txt"}
