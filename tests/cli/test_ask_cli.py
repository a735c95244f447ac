# SPDX-License-Identifier: Apache-2.0
"""``mxrag ask``, ``chat``, ``search`` and ``graph`` over one knowledge base of real files and the
real embedding model; answers from the scripted OpenAI-compatible LLM (it echoes the prompt, so an
answer shows what the chain sent), once from the embedded llama.cpp server."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mx_rag.testing import Reply, ScriptedServer
from tests.cli.cli_helpers import MXRAG, clean_env, invoke, mxrag, one_line_error

pytestmark = pytest.mark.slow

GUIDE = "# Storage\n\nBy default mx_rag keeps vectors in a FAISS index file named faiss.index.\n"
HARBOUR = "# Harbour\n\nThe old harbour of Norwich received wool ships every spring.\n"


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working folder with docs/guide.md and docs/harbour.md ingested into knowledge base "handbook"."""
    cwd = tmp_path_factory.mktemp("ask")
    (cwd / "docs").mkdir()
    (cwd / "docs" / "guide.md").write_text(GUIDE, encoding="utf-8")
    (cwd / "docs" / "harbour.md").write_text(HARBOUR, encoding="utf-8")
    done = mxrag("ingest", "docs", "--kb", "handbook", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return cwd


@pytest.fixture
def here(site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(site)
    return site


def test_ask_timings_prints_each_stage_of_the_answer(here: Path, llm: ScriptedServer) -> None:
    result = invoke("ask", "Where are vectors kept?", "--kb", "handbook", "--chain", "hybrid", "--stream",
                    "--timings", "--llm-url", llm.url("/v1"))
    assert result.exit_code == 0, result.stderr
    assert "faiss.index" in result.stdout
    shown = dict(line.split()[:2] for line in result.stderr.partition("timings:\n")[2].splitlines())
    assert {"query.embed", "query.vector_search", "query.keyword_search", "query.fusion", "query.prompt",
            "query.llm_first_token", "query.llm", "total"} <= set(shown)
    assert all(float(ms) >= 0 for ms in shown.values())


def test_ask_accepts_the_base_url_and_prints_the_answer_and_its_sources(here: Path, llm: ScriptedServer) -> None:
    before = len(llm.requests)
    result = invoke("ask", "Where are vectors kept?", "--kb", "handbook", "--llm-url", llm.url("/v1"))
    assert result.exit_code == 0, result.stderr
    answer, _, sources = result.stdout.partition("\nSources:\n")
    assert answer.startswith("echo:") and "faiss.index" in answer  # the passage reached the LLM
    assert sources.splitlines()[0].startswith("  [1] docs/guide.md (score ")
    assert [r.path for r in llm.requests[before:]] == ["/v1/chat/completions"]


def test_ask_json_parses(here: Path, llm: ScriptedServer) -> None:
    result = invoke("ask", "Where are vectors kept?", "--kb", "handbook", "--llm-url", llm.url("/v1"), "--json",
                    "--k", "1")
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["knowledge_base"] == "handbook" and body["chain"] == "hybrid"  # chain.type
    assert body["question"] == "Where are vectors kept?" and body["answer"].startswith("echo:")
    assert [s["path"] for s in body["sources"]] == ["docs/guide.md"]
    assert body["sources"][0]["source"] == "guide.md" and "faiss.index" in body["sources"][0]["text"]


@pytest.mark.parametrize("chain", ["parallel", "hybrid", "multi-query", "corag"])
def test_every_chain_answers_with_sources(here: Path, llm: ScriptedServer, chain: str) -> None:
    result = invoke("ask", "Where are vectors kept?", "--kb", "handbook", "--chain", chain, "--json",
                    "--llm-url", llm.url("/v1/chat/completions"))
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["chain"] == chain and body["answer"]
    assert any(s["path"] == "docs/guide.md" for s in body["sources"]), body["sources"]


def test_stream_prints_each_piece_as_it_comes(here: Path, llm: ScriptedServer) -> None:
    llm.enqueue(Reply.stream(["Vectors ", "live ", "in faiss.index."], chunk_delay=1.5))
    proc = subprocess.Popen([*MXRAG, "ask", "Where are vectors kept?", "--kb", "handbook", "--stream", "--json",
                             "--llm-url", llm.url("/v1")], cwd=here, env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []], daemon=True)
    reader.start()
    try:
        first = json.loads(lines.get(timeout=240))
        still_running = proc.poll() is None  # the last pieces are still on their way
        proc.wait(timeout=120)
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 0, stderr
    assert first == {"delta": "Vectors "} and still_running
    rest = []
    while not lines.empty():
        rest.append(json.loads(lines.get()))
    assert rest[:-1] == [{"delta": "live "}, {"delta": "in faiss.index."}]
    assert rest[-1]["sources"][0]["source"] == "guide.md"


def test_stream_as_text(here: Path, llm: ScriptedServer) -> None:
    llm.enqueue(Reply.stream(["Vectors ", "live ", "in faiss.index."]))
    result = invoke("ask", "Where are vectors kept?", "--kb", "handbook", "--stream", "--llm-url", llm.url("/v1"))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Vectors live in faiss.index.\n\nSources:\n  [1] docs/guide.md")


def test_search_prints_chunks_without_an_llm(here: Path) -> None:
    result = invoke("search", "FAISS index file", "--kb", "handbook", "--k", "2")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("[1] docs/guide.md (score ") and "faiss.index" in result.stdout
    found = json.loads(invoke("search", "wool ships", "--kb", "handbook", "--json").stdout)
    assert found[0]["path"] == "docs/harbour.md" and "wool ships" in found[0]["text"]
    assert list(found[0]) == ["text", "path", "page", "score"] and found[0]["page"] is None  # a Markdown file


def test_errors_are_one_line_with_the_right_exit_code(here: Path, llm: ScriptedServer) -> None:
    unknown = invoke("ask", "q", "--kb", "nope", "--llm-url", llm.url("/v1"))
    assert unknown.exit_code == 1
    assert "no knowledge base 'nope'" in one_line_error(unknown.stderr) and "there: handbook" in unknown.stderr
    assert invoke("search", "q", "--kb", "nope").exit_code == 1
    no_graph = invoke("ask", "q", "--kb", "handbook", "--chain", "graph", "--llm-url", llm.url("/v1"))
    assert no_graph.exit_code == 1 and "keeps no graph" in one_line_error(no_graph.stderr)
    assert invoke("ask", "q", "--kb", "handbook", "--chain", "bogus").exit_code == 2
    assert invoke("ask", "--kb", "handbook").exit_code == 2
    assert invoke("ask", "q", "--kb", "handbook", "--k", "0").exit_code == 2
    llm.enqueue(Reply.status(401, {"error": {"message": "bad key"}}))
    refused = invoke("ask", "q", "--kb", "handbook", "--llm-url", llm.url("/v1"))
    assert refused.exit_code == 1 and "401" in one_line_error(refused.stderr)


def test_an_unreachable_llm_is_one_line(here: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = invoke("ask", "Where are vectors kept?", "--kb", "handbook", "--llm-url", f"http://127.0.0.1:{port}/v1")
    assert result.exit_code == 1
    assert f"127.0.0.1:{port}" in one_line_error(result.stderr)
    assert result.stdout == ""


def test_chat_keeps_the_conversation(here: Path, llm: ScriptedServer) -> None:
    before = len(llm.requests)
    result = invoke("chat", "--kb", "handbook", "--llm-url", llm.url("/v1"), "--no-stream",
                    input="Where are vectors kept?\n\nAnd the wool ships?\n/clear\nThird question?\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("\nSources:\n") == 3
    asked = [r.json["messages"] for r in llm.requests[before:]]
    assert len(asked) == 3
    assert [m["role"] for m in asked[0]] == ["user"]
    second = asked[1]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[0]["content"] == "Where are vectors kept?" and second[1]["content"].startswith("echo:")
    assert "wool ships" in second[2]["content"]
    assert [m["role"] for m in asked[2]] == ["user"]  # /clear forgot the conversation


def test_chat_survives_ctrl_c(here: Path, llm: ScriptedServer) -> None:
    """Ctrl-C while an answer is awaited stops that answer; the next question is answered; Ctrl-C
    at the prompt ends the chat with exit code 0."""
    import signal

    from mx_rag.testing.scripted_server import Fault

    llm.enqueue(Fault.hang(hold=60))
    before = len(llm.requests)
    proc = subprocess.Popen([*MXRAG, "chat", "--kb", "handbook", "--llm-url", llm.url("/v1")], cwd=here,
                            env=clean_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, bufsize=1)
    out: queue.Queue[str] = queue.Queue()
    err: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [out.put(line) for line in proc.stdout or []], daemon=True).start()
    reader = threading.Thread(target=lambda: [err.put(line) for line in proc.stderr or []], daemon=True)
    reader.start()
    said = ""
    try:
        assert proc.stdin is not None
        proc.stdin.write("Where are vectors kept?\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 240
        while len(llm.requests) == before:  # the question reached the (hanging) LLM
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr and proc.stderr.read()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        proc.stdin.write("And the wool ships?\n")
        proc.stdin.flush()
        seen = ""
        while "Sources:" not in seen:
            seen += out.get(timeout=120)
        while "harbour.md" not in seen:
            seen += out.get(timeout=30)
        proc.stdin.write("/clear\n")  # its reply shows that the answer is over and the chat reads again
        proc.stdin.flush()
        while "(conversation cleared)" not in said:
            said += err.get(timeout=60)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)  # at the prompt: the end
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    proc.wait()
    reader.join(timeout=30)
    while not err.empty():
        said += err.get()
    assert rc == 0, said
    assert "(answer stopped)" in said and "Traceback" not in said
    assert "wool ships" in seen


def test_ask_with_docs_ingests_first_as_before(tmp_path: Path, llm: ScriptedServer, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "guide.md").write_text(GUIDE, encoding="utf-8")
    args = ("ask", "Where are vectors kept?", "--docs", "notes", "--workdir", "kb", "--llm-url", llm.url("/v1"))
    first = invoke(*args)
    assert first.exit_code == 0, first.stderr
    assert "knowledge base 'default': 1 added, 0 updated, 0 unchanged, 0 failed" in first.stderr
    assert "[1] notes/guide.md" in first.stdout
    again = invoke(*args)
    assert "0 added, 0 updated, 1 unchanged" in again.stderr


def test_graph_build_show_and_the_graph_chain(here: Path, llm: ScriptedServer) -> None:
    built = invoke("graph", "build", "handbook")
    assert built.exit_code == 0, built.stderr
    assert "keeps a knowledge graph from now on" in built.stderr
    assert built.stdout.startswith("graph of 'handbook': ") and " entities, " in built.stdout
    shown = json.loads(invoke("graph", "show", "handbook", "--json").stdout)
    assert shown["entities"] >= 2 and shown["top"]
    entity = shown["top"][0]["name"]
    one = invoke("graph", "show", "handbook", "--entity", entity)
    assert one.exit_code == 0 and one.stdout.startswith(shown["top"][0]["label"])
    missing = invoke("graph", "show", "handbook", "--entity", "no such thing at all")
    assert missing.exit_code == 1 and "has no entity" in one_line_error(missing.stderr)
    answer = invoke("ask", "Where does mx_rag keep vectors?", "--kb", "handbook", "--chain", "graph", "--json",
                    "--llm-url", llm.url("/v1"))
    assert answer.exit_code == 0, answer.stderr
    assert json.loads(answer.stdout)["answer"].startswith("echo:")
    listed = json.loads(invoke("kb", "list", "--json").stdout)
    assert {"name": "handbook", "documents": 2, "chunks": 2, "graph": True} in listed
    (here / "docs" / "lighthouse.md").write_text("# Lighthouse\n\nThe Cromer lighthouse guides the ships.\n",
                                                 encoding="utf-8")
    extended = invoke("ingest", "docs", "--kb", "handbook", "--json")  # a graph knowledge base: the graph grows
    assert extended.exit_code == 0, extended.stderr
    assert "building the graph of 1 new or changed document(s)" in extended.stderr
    assert json.loads(extended.stdout)["graph_nodes"] > shown["entities"]


@pytest.mark.llm
def test_ask_with_the_embedded_llm(here: Path, local_llm: Any) -> None:
    result = invoke("ask", "Where are vectors kept?", "--kb", "handbook", "--llm-url", local_llm.base_url,
                    "--llm-model", local_llm.model_name, "--max-tokens", "24")
    assert result.exit_code == 0, result.stderr
    answer, _, sources = result.stdout.partition("\nSources:\n")
    assert answer.strip() and "docs/guide.md" in sources
