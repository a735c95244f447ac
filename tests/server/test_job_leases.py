# SPDX-License-Identifier: Apache-2.0
"""Upload jobs whose worker dies (issue 29, case 8): leases, heartbeats and the reaper of
``mx_rag.server.jobs`` on SQLite and PostgreSQL registries, and a ``kill -9`` of the worker of a
real ``mxrag serve --workers 2`` that runs an upload's job: the job reports ``failed`` within 60 s,
through the other worker, and nothing it uploaded is left on disk (nor the temporary file of an upload
whose worker died while saving it)."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, create_engine

from mx_rag.knowledge.store import KnowledgeStore
from mx_rag.server.jobs import REAPED, JobStore
from mx_rag.testing import ScriptedServer

MXRAG = [sys.executable, "-m", "mx_rag.cli"]


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        yield KnowledgeStore(db_path=str(tmp_path / "sql.db")).engine
    else:
        url = request.getfixturevalue("postgres_schema_url")
        engine = create_engine(url)
        yield engine
        engine.dispose()


def test_a_dead_workers_job_is_reaped_once_and_never_run(engine: Engine, tmp_path: Path) -> None:
    upload = tmp_path / "uploads" / "doc.txt"
    upload.parent.mkdir(parents=True)
    upload.write_text("x")
    reaped: list[tuple[str, str, list[Path]]] = []
    dead = JobStore(engine, lease_s=1, on_reaped=lambda *args: reaped.append(args))
    live = JobStore(engine, lease_s=1, on_reaped=lambda *args: reaped.append(args))
    other = JobStore(engine, lease_s=1, on_reaped=lambda *args: reaped.append(args))
    dead.stop()  # the dead worker beats no more (its thread, started by create, ends at once)
    job_id = dead.create("alice_01", "handbook", [upload])
    assert live.claim(job_id) is False  # only the worker holding the lease runs a job
    assert live.reap() == [] and other.reap() == []  # the lease holds for lease_s
    time.sleep(1.3)
    assert dead.reap() == []  # a worker never reaps its own jobs
    assert sorted([*live.reap(), *other.reap()]) == [job_id]  # one reaper wins
    job = live.get("alice_01", "handbook", job_id)
    assert job.status == "failed" and job.error == REAPED
    assert reaped == [("alice_01", "handbook", [upload])]
    assert dead.claim(job_id) is False and dead.update(job_id, status="done") is False
    assert live.get("alice_01", "handbook", job_id).status == "failed"


def test_a_live_workers_heartbeat_keeps_its_job(engine: Engine) -> None:
    worker = JobStore(engine, lease_s=1, on_reaped=lambda *args: None)
    other = JobStore(engine, lease_s=1, on_reaped=lambda *args: None)
    try:
        job_id = worker.create("alice_01", "handbook", [])
        assert worker.claim(job_id)
        time.sleep(2.0)  # two leases long: the heartbeat renews it every third
        assert other.reap() == []
        assert worker.update(job_id, status="done") and worker.get("alice_01", "handbook", job_id).status == "done"
    finally:
        worker.stop()
        other.stop()


def _workers(pid: int) -> list[int]:
    """The worker processes uvicorn's supervisor ``pid`` spawned (not its resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_kill_9_of_a_worker_during_an_upload_fails_the_job_and_leaves_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    text = "".join(f"Paragraph {n} tells of reactor {n} and its molten salt of grade {n % 7}.\n\n"
                   for n in range(6000))  # long enough to be ingesting when the workers die
    stale = data / "uploads" / "Default" / "handbook" / f".{'0' * 32}.part"  # what a worker killed while saving leaves
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"half a file")
    os.utime(stale, (time.time() - 120, time.time() - 120))
    with ScriptedServer() as llm, _serve(data, llm, {"MXRAG_UPLOAD__JOB_LEASE_S": "3"}) as (proc, url):
        with httpx.Client(base_url=url, timeout=60) as http:
            assert http.post("/v1/knowledge-bases", json={"name": "handbook"}).status_code == 201
            job = http.post("/v1/knowledge-bases/handbook/documents",
                            files={"files": ("long.txt", text.encode())}).json()
            while http.get(f"/v1/knowledge-bases/handbook/jobs/{job['id']}").json()["status"] == "queued":
                time.sleep(0.05)
            with sqlite3.connect(data / "sql.db") as db:  # the lease names the worker: "<pid>-<random>"
                owner = db.execute("SELECT owner FROM ingest_job_leases WHERE job_id = ?", (job["id"],)).fetchone()
            busy = int(owner[0].split("-")[0])
            assert busy in _workers(proc.pid)
            os.kill(busy, signal.SIGKILL)  # the other worker lives on, and reaps the job
            killed = time.monotonic()
            state = job
            while time.monotonic() - killed < 60:
                with contextlib.suppress(httpx.HTTPError):  # the supervisor is starting new workers
                    state = http.get(f"/v1/knowledge-bases/handbook/jobs/{job['id']}").json()
                if state["status"] in ("done", "failed"):
                    break
                time.sleep(0.5)
            assert state["status"] == "failed" and "worker stopped" in state["error"], state
            documents = http.get("/v1/knowledge-bases/handbook").json()["documents"]
        assert documents == []
        assert [p.name for p in (data / "uploads").rglob("*") if p.is_file()] == []


@pytest.mark.slow
def test_a_stop_signal_ends_serve_while_a_worker_restarts_and_a_hung_worker_is_killed(tmp_path: Path) -> None:
    with ScriptedServer() as llm, _serve(tmp_path / "data", llm, {}) as (proc, _):
        first, second = _workers(proc.pid)
        os.kill(first, signal.SIGKILL)  # the supervisor starts a replacement...
        os.kill(second, signal.SIGSTOP)  # ...and this one hangs: it cannot act on a stop signal
        deadline = time.monotonic() + 30
        while len(_workers(proc.pid)) < 2 or first in _workers(proc.pid):
            assert time.monotonic() < deadline, "no replacement for the killed worker"
            time.sleep(0.1)
        replacement = next(pid for pid in _workers(proc.pid) if pid != second)
        proc.terminate()  # while the replacement is still starting: handled at once, not after its ping
        assert proc.wait(timeout=60) == 0
    assert not Path(f"/proc/{second}").exists() and not Path(f"/proc/{replacement}").exists()


@contextlib.contextmanager
def _serve(data: Path, llm: ScriptedServer, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``mxrag serve --workers 2`` on ``data``, ready; stopped with SIGTERM on leaving (it must end
    within 60 s; its log is shown if not)."""
    data.mkdir(parents=True, exist_ok=True)
    log = data.parent / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen([*MXRAG, "serve", "--data-dir", str(data), "--port", "0", "--workers", "2",
                                 "--llm-url", llm.url("/v1")], stdout=subprocess.PIPE, stderr=err, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", **env})
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        with httpx.Client(base_url=url, timeout=60) as http:
            deadline = time.monotonic() + 120
            while len(_workers(proc.pid)) < 2 or not _ready(http):
                assert time.monotonic() < deadline, "mxrag serve did not start"
                time.sleep(0.5)
        yield proc, url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"mxrag serve did not stop within 60 s of SIGTERM; its log ends:\n{log.read_text()[-3000:]}")


def _ready(http: httpx.Client) -> bool:
    try:
        return http.get("/healthz").status_code == 200
    except httpx.HTTPError:
        return False
