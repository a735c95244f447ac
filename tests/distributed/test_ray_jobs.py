# SPDX-License-Identifier: Apache-2.0
"""The server's upload jobs handed to the local Ray cluster (``[ingest] ray_address``): a real
uvicorn server, a real httpx client, the real PostgreSQL and Milvus. A job of at least
``ray_min_files`` files runs through the worker's warm ``RayPool``, its files' bytes sent with the
tasks; a smaller one runs in the server. And the checks that need no cluster: the settings'
limits, a server refused at start without shared stores, a file loaded from the bytes sent."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import httpx
import pytest

from mx_rag.app.scale_out import _loader
from mx_rag.app.settings import ServerSettings, load_settings
from mx_rag.distributed import chunk_id
from mx_rag.distributed.stages import load_and_split
from mx_rag.embedding.local.model_info import MINILM_NAME
from mx_rag.errors import ParameterError
from mx_rag.knowledge.ingest import file_digest
from mx_rag.llm import Text2TextLLM
from mx_rag.server.app import create_app
from mx_rag.server.runner import AppServer
from mx_rag.server.service import KnowledgeService
from mx_rag.testing import ScriptedServer
from mx_rag.utils import ClientParam
from tests.distributed.conftest import Stack
from tests.distributed.test_ray_ingest import corpus
from tests.server.jobs import wait_job

KB = "handbook"


def job_settings(stack: Stack, address: str) -> ServerSettings:
    return load_settings(data_dir=stack.data_dir, embedding={"model": MINILM_NAME},
                         ingest={"ray_address": address, "ray_min_files": 3, "ray_embedders": 1,
                                 "ray_embed_cpus": 0.5},
                         stores={"postgres_url": stack.postgres_url, "registry_url": stack.postgres_url,
                                 "milvus_url": stack.milvus_uri, "milvus_collection": stack.collection})


def upload(http: httpx.Client, files: list[Path]) -> dict[str, Any]:
    response = http.post(f"/v1/knowledge-bases/{KB}/documents",
                         files=[("files", (p.name, p.read_bytes())) for p in files])
    assert response.status_code == 202, response.text
    return wait_job(http, KB, response.json())


@pytest.mark.slow
def test_a_large_upload_job_runs_on_the_cluster_a_small_one_in_the_server(ray_cluster: str, stack: Stack,
                                                                         tmp_path: Path) -> None:
    service = KnowledgeService(job_settings(stack, ray_cluster))
    paths = corpus(tmp_path / "docs", files=5)
    llm_param = ClientParam(use_http=True, retries=0)
    with ScriptedServer() as llm, AppServer(create_app(service, Text2TextLLM(
            base_url=llm.url("/v1/chat/completions"), model_name="m", client_param=llm_param)),
            host="127.0.0.1", port=0) as server, httpx.Client(base_url=server.base_url, timeout=60) as http:
        assert http.post("/v1/knowledge-bases", json={"name": KB}).status_code == 201
        job = upload(http, paths[:4])  # 4 >= ray_min_files: on the cluster
        assert job["status"] == "done" and job["processed"] == 4, job
        assert job["results"] == {p.name: "stored" for p in paths[:4]}
        kb = service.open(service.local_principal(), KB)
        rows = {Path(r.document_file_path).name: r for r in kb.get_all_documents()}
        for row in rows.values():  # the ids the cluster's tasks give (in-process ids count up from 1)
            path = Path(row.document_file_path)
            ids = {d.chunk_id for d in service.chunks.search_by_document_id(row.document_id)}
            assert ids and ids == {chunk_id(kb.knowledge_id, str(path), file_digest(path), i) for i in range(len(ids))}
            assert path.is_relative_to(service.uploads)  # the server's copy, sent to the workers as bytes

        small = upload(http, paths[4:])  # 1 < ray_min_files: in the server
        assert small["status"] == "done" and small["results"] == {paths[4].name: "stored"}, small
        row = next(r for r in kb.get_all_documents() if r.document_file_path.endswith(paths[4].name))
        ids = {d.chunk_id for d in service.chunks.search_by_document_id(row.document_id)}
        path = Path(row.document_file_path)
        assert ids and not ids & {chunk_id(kb.knowledge_id, str(path), file_digest(path), i) for i in range(len(ids))}

        again = upload(http, paths[:4])  # the same files again: nothing new, on the cluster
        assert again["status"] == "done" and again["results"] == {p.name: "unchanged" for p in paths[:4]}, again
        documents = http.get(f"/v1/knowledge-bases/{KB}/documents").json()["documents"]
        assert sorted(d["name"] for d in documents) == sorted(p.name for p in paths)
        assert all(d["chunks"] > 0 for d in documents)
        hits = http.post(f"/v1/knowledge-bases/{KB}/retrieve", json={"query": "Note 203 ends here", "top_k": 3})
        assert hits.status_code == 200 and len(hits.json()["documents"]) == 3, hits.text
        texts = "\n".join(p.read_text(encoding="utf-8") for p in paths)
        assert all(doc in texts for doc in hits.json()["documents"])  # chunks of the uploaded files
    service.close()
    assert service._pool is None  # the warm pool is closed with the service


def test_ray_min_files_out_of_range_names_the_setting_and_its_range(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match=r"ray_min_files.*1"):
        load_settings(data_dir=tmp_path, ingest={"ray_min_files": 0})


def test_a_server_with_ray_address_but_local_stores_is_refused_when_it_starts(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match=r"ray_address = 'auto' needs stores every node reaches.*registry_url, "
                                             r"postgres_url, milvus_url are not set"):
        KnowledgeService(load_settings(data_dir=tmp_path, ingest={"ray_address": "auto"}))


def test_a_file_sent_as_bytes_is_loaded_where_its_path_does_not_exist(tmp_path: Path) -> None:
    source = corpus(tmp_path / "docs", files=1)[0]
    elsewhere = "/srv/uploads/u/kb/rocks-0.md"  # the driver's path: not on this "node"
    row = {"doc_id": 7, "path": elsewhere, "digest": file_digest(source), "knowledge_id": 3}
    factory = functools.partial(_loader, 750, 150)
    sent = load_and_split({**row, "data": source.read_bytes()}, factory)
    local = load_and_split({**row, "path": str(source)}, factory)
    assert len(sent) == len(local) > 1 and not any(c["error"] for c in sent)
    assert [c["text"] for c in sent] == [c["text"] for c in local]
    assert all('"source": "/srv/uploads/u/kb/rocks-0.md"' in c["metadata"] for c in sent)
    assert sent[0]["chunk_id"] == chunk_id(3, elsewhere, row["digest"], 0)
    missing = load_and_split(row, factory)  # no bytes and no file: a clear failure
    assert missing[0]["error"]
