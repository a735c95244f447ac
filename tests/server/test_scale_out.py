# SPDX-License-Identifier: Apache-2.0
"""Scale-out: several ``mxrag serve`` processes over one PostgreSQL (registry, API keys, jobs,
chunks) and one Milvus (vectors), each with a data folder of its own, as on separate machines.

Real servers on 127.0.0.1: a Milvus 2.3.5 standalone (``milvus_server``), the PostgreSQL of
``make test`` (a fresh schema per test), the scripted LLM (it echoes the prompt, so an answer
shows the passages retrieved), and ``python -m mx_rag.cli serve`` processes configured through
``MXRAG_STORES__*`` the way machines behind a load balancer would be. An API key made with
``mxrag keys create`` on one "machine" works on every server; a knowledge base created and a
document uploaded through one server must be found through another, and the upload job's
progress read from any of them.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from pymilvus import DataType, MilvusClient
from sqlalchemy import create_engine, text

from mx_rag.errors import ParameterError
from mx_rag.storage.vectorstore import MilvusDB, SearchMode
from mx_rag.storage.vectorstore._milvus_schema import build_params, in_expr, is_lite
from mx_rag.testing import ScriptedServer
from tests.server.jobs import wait_job
from tests.server.milvus_server import MilvusServer

MXRAG = [sys.executable, "-m", "mx_rag.cli"]
START_TIMEOUT_S = 180.0
TIMEOUT = 180.0  # bounds only: this machine may be busy with other work
KB = "archive"
SEEDS = ("seeds.txt", b"The Quillon archive keeps its seed samples at minus eighteen degrees, in a vault "
         b"cut into the mountain above the harbour.\n")
MAPS = ("maps.txt", b"The old harbour maps of the Quillon archive are stored in the east tower, on "
        b"shelves of cedar wood that keep the moths away.\n")


@dataclass(frozen=True)
class Shared:
    """What every server of a test is configured with."""

    data_dir: Path  # the parent of each "machine"'s own data folder
    postgres_url: str
    milvus_uri: str
    collection: str
    llm_url: str

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MXRAG_")}  # no stray config
        env.update({
            "PYTHONUNBUFFERED": "1",
            "MXRAG_STORES__POSTGRES_URL": self.postgres_url,
            "MXRAG_STORES__REGISTRY_URL": self.postgres_url,
            "MXRAG_STORES__MILVUS_URL": self.milvus_uri,
            "MXRAG_STORES__MILVUS_COLLECTION": self.collection,
        })
        return env


class Serve:
    """One ``mxrag serve`` process; ``url`` once it is ready."""

    def __init__(self, shared: Shared, workers: int, log: Path, machine: int) -> None:
        command = [*MXRAG, "serve", "--data-dir", str(shared.data_dir / f"machine{machine}"), "--port", "0",
                   "--workers", str(workers), "--llm-url", shared.llm_url]
        self.log = log
        with log.open("w") as stderr:
            self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                         env=shared.env(), cwd=log.parent)
        self.url = ""

    def wait_ready(self) -> str:
        stream = self.proc.stdout
        assert stream is not None
        box: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: box.put(stream.readline()), daemon=True).start()
        try:
            self.url = box.get(timeout=START_TIMEOUT_S).strip()
        except queue.Empty:
            self.url = ""
        assert self.url.startswith("http://127.0.0.1:"), self.failure("printed no URL")
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if httpx.get(self.url + "/readyz", timeout=TIMEOUT).status_code == 200:
                    return self.url
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise AssertionError(self.failure("never became ready"))

    def failure(self, what: str) -> str:
        return f"mxrag serve {what} (exit code {self.proc.poll()}); stderr:\n{self.log.read_text()[-4000:]}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def llm() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def shared(milvus_server: MilvusServer, postgres_schema_url: str, llm: ScriptedServer,
           tmp_path: Path) -> Iterator[Shared]:
    """One data folder, a fresh PostgreSQL schema and a fresh Milvus collection (dropped after)."""
    with milvus_server.scratch_collection("scale") as collection:
        yield Shared(tmp_path / "data", postgres_schema_url, milvus_server.uri, collection, llm.url("/v1"))


def serving(stack: ExitStack, shared: Shared, *workers: int) -> list[str]:
    """Start one ``mxrag serve`` per entry of ``workers`` (all at once, as machines would) and
    return their URLs once every one is ready."""
    serves = []
    for n, count in enumerate(workers):
        serve = Serve(shared, count, shared.data_dir.parent / f"serve{n}.stderr", n)
        stack.callback(serve.stop)
        serves.append(serve)
    return [serve.wait_ready() for serve in serves]


def create_key(shared: Shared, machine: int) -> str:
    """``mxrag keys create`` on one machine: the key lands in the shared registry."""
    done = subprocess.run([*MXRAG, "keys", "create", "alice01", "--admin", "--data-dir",
                           str(shared.data_dir / f"machine{machine}")], capture_output=True, text=True,
                          env=shared.env(), timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


_keys: list[str] = []  # the key of the running test, sent by every client below


def client(url: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {_keys[-1]}"} if _keys else {}
    return httpx.Client(base_url=url, timeout=TIMEOUT, headers=headers)


def create_and_upload(url: str, kb: str | None, document: tuple[str, bytes]) -> dict[str, Any]:
    """Create ``kb`` (when given) and upload ``document`` through the server at ``url``."""
    with client(url) as http:
        if kb is not None:
            created = http.post("/v1/knowledge-bases", json={"name": kb})
            assert created.status_code == 201, created.text
        response = http.post(f"/v1/knowledge-bases/{KB}/documents", files={"files": document})
        assert response.status_code == 202, response.text
        job: dict[str, Any] = response.json()
        return job


def retrieved(url: str, query: str) -> list[str]:
    with client(url) as http:  # a new connection per call
        response = http.post(f"/v1/knowledge-bases/{KB}/retrieve", json={"query": query, "top_k": 3})
        assert response.status_code == 200, response.text
        documents: list[str] = response.json()["documents"]
        return documents


def embedded(url: str, text: str) -> list[float]:
    with client(url) as http:
        response = http.post("/v1/embeddings", json={"input": [text]})
        assert response.status_code == 200, response.text
        vector: list[float] = response.json()["data"][0]["embedding"]
        return vector


def answer(url: str, question: str) -> dict[str, Any]:
    with client(url) as http:
        response = http.post("/v1/chat/completions", json={
            "model": KB, "messages": [{"role": "user", "content": question}]})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


def stored_counts(shared: Shared) -> tuple[int, int]:
    """(rows in the Milvus collection, rows in the PostgreSQL chunk table)."""
    client = MilvusClient(uri=shared.milvus_uri)
    try:
        vectors = int(client.query(shared.collection, filter="", output_fields=["count(*)"])[0]["count(*)"])
    finally:
        client.close()
    engine = create_engine(shared.postgres_url)
    try:
        with engine.connect() as conn:
            chunks = int(conn.execute(text("SELECT count(*) FROM chunks_table")).scalar_one())
    finally:
        engine.dispose()
    return vectors, chunks


def found_everywhere(urls: list[str], query: str, passage: str) -> None:
    """``query`` retrieves ``passage`` through every URL (asked all at once, on new connections)."""
    with ThreadPoolExecutor(len(urls)) as pool:
        results = list(pool.map(lambda url: retrieved(url, query), urls))
    for url, found in zip(urls, results, strict=True):
        assert any(passage in doc for doc in found), (url, found)


@pytest.mark.slow
def test_servers_share_one_postgres_and_one_milvus(shared: Shared) -> None:
    """Two ``mxrag serve --workers 1`` and one ``mxrag serve --workers 2``, three "machines"."""
    _keys.append(create_key(shared, 0))
    with ExitStack() as stack:
        stack.callback(_keys.clear)
        first, second, pair = serving(stack, shared, 1, 1, 2)
        assert len({first, second, pair}) == 3
        for url in (first, second, pair):  # the key made on machine 0 is needed, and works, on each
            assert httpx.get(url + "/v1/models", timeout=TIMEOUT).status_code == 401

        with ThreadPoolExecutor(6) as pool:  # the upload, while every process loads its embedding model
            upload = pool.submit(create_and_upload, first, KB, SEEDS)
            vectors = list(pool.map(lambda url: embedded(url, "seed samples"), [first, second, *[pair] * 4]))
        assert len(vectors[0]) == 384
        for vector in vectors[1:]:  # one shared collection needs every process to embed alike
            assert np.allclose(vector, vectors[0], atol=1e-5)

        with client(second) as http:  # uploaded to one, seen on the other
            job = wait_job(http, KB, upload.result())
        assert job["status"] == "done" and job["results"] == {"seeds.txt": "stored"}, job
        with client(second) as http:
            described = http.get(f"/v1/knowledge-bases/{KB}").json()
        assert [d["name"] for d in described["documents"]] == ["seeds.txt"] and described["chunks"] >= 1
        # four requests at once to the two-worker server, so that both of its workers answer some
        found_everywhere([second, *[pair] * 4], "At what temperature are the seed samples kept?",
                         "minus eighteen degrees")
        for url in (second, pair, pair):
            reply = answer(url, "At what temperature does the Quillon archive keep its seed samples?")
            assert reply["sources"][0]["source"] == "seeds.txt", reply
            assert "minus eighteen degrees" in reply["choices"][0]["message"]["content"]  # the echoed prompt

        with client(first) as http:  # and from the two-worker server
            job = wait_job(http, KB, create_and_upload(pair, None, MAPS))
        assert job["status"] == "done" and job["results"] == {"maps.txt": "stored"}, job
        found_everywhere([first, second, pair], "Where are the harbour maps stored?", "east tower")
        reply = answer(first, "Where does the archive keep its old harbour maps?")
        assert reply["sources"][0]["source"] == "maps.txt", reply
        assert "cedar wood" in reply["choices"][0]["message"]["content"]

        vectors, chunks = stored_counts(shared)
        assert vectors == chunks >= 2  # the vectors are in Milvus, the chunks in PostgreSQL
        for machine in range(3):  # nothing of the stores in any machine's folder
            assert not {"faiss.index", "sql.db"} & {p.name for p in (shared.data_dir / f"machine{machine}").iterdir()}


def test_milvusdb_on_a_milvus_2_3_server(milvus_server: MilvusServer) -> None:
    """MilvusDB's dense modes on Milvus 2.3: every index type builds and serves filtered searches;
    sparse collections are refused with the version needed."""
    client = MilvusClient(uri=milvus_server.uri)
    version = client.get_server_version()
    assert version.startswith("v2.3.") and not is_lite(version)  # "v2.3.5-lite" is a whole Milvus
    assert in_expr("id", [1, 2], version) == ("id in [1, 2]", {})
    rng = np.random.default_rng(0)
    data = rng.standard_normal((40, 16)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    names = []
    try:
        for index_type in ("FLAT", "HNSW", "IVF_FLAT", "IVF_PQ"):  # 2.3 needs HNSW/IVF build parameters
            name = f"compat_{index_type.lower()}_{uuid.uuid4().hex[:8]}"
            names.append(name)
            store = MilvusDB.create(client=client, collection_name=name, x_dim=16, metric_type="IP",
                                    index_type=index_type, auto_flush=False)  # a flush takes seconds on 2.3
            store.add(list(range(40)), data, document_id=[i % 4 for i in range(40)],
                      docs=[f"chunk {i}" for i in range(40)])
            assert store.count() == 40
            scores, ids = store.search(data[:2], k=1)
            assert ids == [[0], [1]] and scores[0][0] == pytest.approx(1.0, abs=1e-4)
            _, ids = store.search(data[:1], k=40, filter_dict={"document_id": [2]})
            assert sorted(ids[0]) == list(range(2, 40, 4))
            built = {client.describe_index(name, index_name=n)["index_type"] for n in client.list_indexes(name)}
            assert built == {index_type}
        store.update([3], dense=data[5:6])  # the writes, on the last store
        assert sorted(store.search(data[5:6], k=2)[1][0]) == [3, 5]
        assert store.delete([0, 1, 999]) == 2
        store.flush()
        assert store.count() == 38 and store.get_all_ids() == list(range(2, 40))
        for mode in (SearchMode.SPARSE, SearchMode.HYBRID):
            with pytest.raises(ParameterError, match=r"Milvus 2\.4 or later"):
                MilvusDB.create(client=client, collection_name=f"sparse_{uuid.uuid4().hex[:8]}", x_dim=16,
                                metric_type="IP", search_mode=mode)
    finally:
        for name in names:
            if client.has_collection(name):
                client.drop_collection(name)
        client.close()


def test_a_collection_another_server_is_still_indexing_is_waited_for(milvus_server: MilvusServer) -> None:
    """Create, index and load are separate Milvus calls: a server that finds the shared collection
    between the first two (another one is starting) waits for the index instead of failing on
    load with "index not found" (seen when three servers started together)."""
    client = MilvusClient(uri=milvus_server.uri)
    name = f"midway_{uuid.uuid4().hex[:8]}"
    schema = client.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=16)
    schema.add_field("document_id", DataType.INT64)
    client.create_collection(name, schema=schema, consistency_level="Strong")  # the first server, before its index
    try:
        assert client.list_indexes(name) == []

        def finish_indexing() -> None:
            indexes = client.prepare_index_params()
            indexes.add_index(field_name="vector", index_name="dense_index", index_type="FLAT", metric_type="IP")
            client.create_index(name, indexes)

        later = threading.Timer(1.0, finish_indexing)
        later.start()
        try:
            store = MilvusDB.create(client=client, collection_name=name, metric_type="IP", auto_flush=False)
        finally:
            later.join()
        data = np.eye(16, dtype=np.float32)[:3]
        store.add([1, 2, 3], data, document_id=1)
        assert store.search(data[2:], k=1)[1] == [[3]]
    finally:
        client.drop_collection(name)
        client.close()


def test_servers_creating_one_collection_at_once_all_open_it(milvus_server: MilvusServer) -> None:
    name = f"together_{uuid.uuid4().hex[:8]}"
    clients = [MilvusClient(uri=milvus_server.uri) for _ in range(4)]
    try:
        with ThreadPoolExecutor(len(clients)) as pool:
            stores = list(pool.map(lambda c: MilvusDB.create(client=c, collection_name=name, x_dim=16,
                                                             metric_type="IP", auto_flush=False), clients))
        data = np.eye(16, dtype=np.float32)[:2]
        stores[0].add([1, 2], data, document_id=1)
        assert [store.search(data[1:], k=1)[1] for store in stores] == [[[2]]] * 4
        assert clients[0].list_indexes(name) == ["dense_index"]
    finally:
        clients[0].drop_collection(name)
        for client in clients:
            client.close()


def test_server_versions_are_told_apart() -> None:
    assert is_lite("milvus_lite-3.2.2") and not is_lite("v2.3.5-lite") and not is_lite("v2.5.4")
    assert in_expr("id", [1], "v2.3.5-lite") == ("id in [1]", {})
    assert build_params({}, SearchMode.DENSE, "HNSW", "v2.3.5-lite") == {"dense": {"M": 30, "efConstruction": 360}}
    given = {"dense": {"nlist": 4}}
    assert build_params(given, SearchMode.DENSE, "IVF_PQ", "v2.3.5-lite") == given
    for newer in ("v2.4.9", "v2.5.4", "milvus_lite-3.2.2"):
        assert build_params({}, SearchMode.DENSE, "HNSW", newer) == {}
        assert build_params({}, SearchMode.HYBRID, "FLAT", newer) == {}
    with pytest.raises(ParameterError, match="sparse vectors"):
        build_params({}, SearchMode.SPARSE, "FLAT", "v2.3.5")
