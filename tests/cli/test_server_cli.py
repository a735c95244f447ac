# SPDX-License-Identifier: Apache-2.0
"""``mxrag serve`` (as a process, with two workers), ``mxrag keys`` and ``mxrag config show``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from mx_rag.cli import main as cli
from mx_rag.testing import ScriptedServer

MXRAG = [sys.executable, "-m", "mx_rag.cli"]
DOC = b"The handbook says: vectors are kept in faiss.index, chunks in sql.db.\n"


def test_keys_create_list_revoke(tmp_path: Path) -> None:
    runner = CliRunner()
    created = runner.invoke(cli.app, ["keys", "create", "alice_01", "--admin", "--name", "laptop",
                                      "--data-dir", str(tmp_path)])
    assert created.exit_code == 0, created.output
    key = created.output.strip()
    assert key.startswith("mxr_") and len(key) > 40
    listed = runner.invoke(cli.app, ["keys", "list", "--data-dir", str(tmp_path)])
    assert "alice_01" in listed.output and "admin" in listed.output and key not in listed.output
    assert runner.invoke(cli.app, ["keys", "revoke", "1", "--data-dir", str(tmp_path)]).exit_code == 0
    assert "revoked" in runner.invoke(cli.app, ["keys", "list", "--data-dir", str(tmp_path)]).output
    missing = runner.invoke(cli.app, ["keys", "revoke", "7", "--data-dir", str(tmp_path)])
    assert missing.exit_code == 1 and "no API key with id 7" in missing.output
    bad = runner.invoke(cli.app, ["keys", "create", "x", "--data-dir", str(tmp_path)])
    assert bad.exit_code == 1 and "user_id" in bad.output


def test_config_show_masks_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "mxrag.toml"
    config.write_text('[llm]\nurl = "http://127.0.0.1:9/v1"\n[chain]\nk = 7\n', encoding="utf-8")
    monkeypatch.setenv("MXRAG_LLM__API_KEY", "sk-very-secret")
    result = CliRunner().invoke(cli.app, ["config", "show", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "k = 7" in result.output and 'url = "http://127.0.0.1:9/v1"' in result.output
    assert "sk-very-secret" not in result.output and 'api_key = "**********"' in result.output
    wrong = CliRunner().invoke(cli.app, ["config", "show", "--config", str(tmp_path / "none.toml")])
    assert wrong.exit_code == 1 and "does not exist" in wrong.output


def test_public_host_without_keys_is_refused(tmp_path: Path) -> None:
    result = subprocess.run([*MXRAG, "serve", "--data-dir", str(tmp_path), "--host", "0.0.0.0",
                             "--llm-url", "http://127.0.0.1:9/v1"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "without API keys" in result.stderr and "Traceback" not in result.stderr


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, ScriptedServer]]:
    with ScriptedServer() as llm:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen([*MXRAG, "serve", "--data-dir", str(tmp_path / "data"), "--port", "0",
                                 "--workers", "2", "--llm-url", llm.url("/v1")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else ""
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.5)
            yield url, llm
        finally:
            proc.terminate()
            proc.wait(timeout=60)


@pytest.mark.slow
def test_serve_with_two_workers_answers_through_a_knowledge_base(served: tuple[str, ScriptedServer]) -> None:
    url, _ = served
    with httpx.Client(base_url=url, timeout=120) as http:
        assert http.post("/v1/knowledge-bases", json={"name": "handbook"}).status_code == 201
        job = http.post("/v1/knowledge-bases/handbook/documents", files={"files": ("guide.txt", DOC)}).json()
        for _ in range(240):  # any worker reports the job: its progress lives in the database
            state = http.get(f"/v1/knowledge-bases/handbook/jobs/{job['id']}").json()
            if state["status"] in ("done", "failed"):
                break
            time.sleep(0.25)
        assert state["status"] == "done" and state["results"] == {"guide.txt": "stored"}, state
        answers = [http.post("/v1/chat/completions", json={
            "model": "handbook", "messages": [{"role": "user", "content": "Where are vectors kept?"}]}).json()
            for _ in range(6)]  # spread over both workers
        for answer in answers:
            assert answer["sources"][0]["source"] == "guide.txt"
            assert "faiss.index" in answer["choices"][0]["message"]["content"]  # the echo LLM repeats the prompt
        assert [m["id"] for m in http.get("/v1/models").json()["data"]] == ["handbook"]


def test_config_show_masks_passwords_in_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXRAG_LLM__URL", "https://svc:llm-pass-1@llm.example/v1")
    monkeypatch.setenv("MXRAG_STORES__MILVUS_URL", "http://root:milvus-pass-2@milvus:19530")
    result = CliRunner().invoke(cli.app, ["config", "show", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "llm-pass-1" not in result.output and "milvus-pass-2" not in result.output
    assert 'url = "https://svc:**********@llm.example/v1"' in result.output
    assert 'milvus_url = "http://root:**********@milvus:19530"' in result.output


@pytest.mark.slow
def test_operator_commands_reach_a_keys_user(tmp_path: Path) -> None:
    """``kb show --user`` and ``kb repair --check --user/--all`` see a knowledge base made through a key."""
    import io

    from mx_rag.app.users import Principal
    from mx_rag.server.service import KnowledgeService
    from mx_rag.server.settings import load_settings

    service = KnowledgeService(load_settings(data_dir=tmp_path))
    alice = Principal("alice_01", admin=True)
    try:
        service.create(alice, "handbook")
        job = service.start_ingest(alice, "handbook", {"guide.txt": service.save_upload(
            alice, "handbook", "guide.txt", io.BytesIO(DOC))})
        deadline = time.monotonic() + 120
        while (job := service.job(alice, "handbook", job.id)).status not in ("done", "failed"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert job.status == "done", job
    finally:
        service.close()
    runner = CliRunner()
    local = runner.invoke(cli.app, ["kb", "show", "handbook", "--data-dir", str(tmp_path)])
    assert local.exit_code == 1 and "no knowledge base 'handbook'" in local.output
    shown = runner.invoke(cli.app, ["kb", "show", "handbook", "--user", "alice_01", "--data-dir", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert "handbook: 1 documents" in shown.output and "guide.txt" in shown.output
    checked = runner.invoke(cli.app, ["kb", "repair", "--check", "--user", "alice_01", "--data-dir", str(tmp_path)])
    assert checked.exit_code == 0 and "handbook: 1 documents" in checked.output, checked.output
    every = runner.invoke(cli.app, ["kb", "repair", "--check", "--all", "--data-dir", str(tmp_path)])
    assert every.exit_code == 0 and "alice_01/handbook: 1 documents" in every.output, every.output
    both = runner.invoke(cli.app, ["kb", "repair", "--all", "--user", "alice_01", "--data-dir", str(tmp_path)])
    assert both.exit_code == 1 and "--all" in both.output
