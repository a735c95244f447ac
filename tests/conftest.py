# SPDX-License-Identifier: Apache-2.0
"""Session fixtures shared by the whole test suite.

``local_llm``: the embedded LLM (``mxrag llm serve``) running in a subprocess for the session.
It is not skipped when the runtime is missing: the fixture fails with the server's error
(fix: ``mxrag llm pull``).

``postgres_url``: ``MXRAG_TEST_POSTGRES_URL`` (``make test`` sets it from
``scripts/ensure_postgres.sh``); skipped without it. ``postgres_schema_url``: that database with a
fresh schema as the search path (dropped with its tables afterwards), so that fixed table names
do not collide between tests or runs.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text

from tests.server.milvus_server import MILVUS_VERSION, MilvusServer, installed_version, running_milvus

SERVE_TIMEOUT = 120.0
# The suite's embedded LLM is the 135M SmolLM2 (seconds to load, fast on two cores): every
# LocalLLMServer started without a model, in this process or a command it runs, serves it.
# `make run` and users get the default of mx_rag.llm.models.
os.environ.setdefault("MXRAG_LLM_MODEL", "smollm2")
STOP_TIMEOUT = 10.0
MODEL_ALIAS = "smollm2"
# The Ctrl-C tests send real SIGINTs, to this process and to the commands it starts. A shell that
# starts a suite in the background (`make test &`, nohup) ignores SIGINT for it, and children
# inherit an ignored signal: Python's own handler again (which a command's exec resets to default).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@dataclass(frozen=True)
class LocalLLM:
    """Where the session's embedded LLM answers."""

    base_url: str  # http://127.0.0.1:PORT/v1
    chat_url: str  # base_url + /chat/completions
    model_name: str


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str | None:
    """The first stdout line of ``proc``, or None if none came within ``timeout`` seconds."""
    stream = proc.stdout
    assert stream is not None
    box: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: box.put(stream.readline()), daemon=True).start()
    try:
        return box.get(timeout=timeout)
    except queue.Empty:
        return None


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture(scope="session")
def local_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalLLM]:
    """Run ``python -m mx_rag.cli llm serve --port 0`` for the session; yield its URLs."""
    log: Path = tmp_path_factory.mktemp("local_llm") / "serve.stderr"
    command = [sys.executable, "-m", "mx_rag.cli", "llm", "serve", "--port", "0", "--ctx", "4096"]
    command += ["--alias", MODEL_ALIAS]
    with log.open("w") as stderr:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        line = (_first_line(proc, SERVE_TIMEOUT) or "").strip()
        if not line.startswith("http"):
            _stop(proc)
            pytest.fail(
                f"`{' '.join(command)}` gave no base URL within {SERVE_TIMEOUT:.0f} s "
                f"(exit code {proc.returncode}); stderr:\n{log.read_text()}",
                pytrace=False,
            )
        yield LocalLLM(base_url=line, chat_url=line + "/chat/completions", model_name=MODEL_ALIAS)
    finally:
        if proc.poll() is None:
            _stop(proc)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    url = os.environ.get("MXRAG_TEST_POSTGRES_URL", "").strip()
    if not url:
        pytest.skip("MXRAG_TEST_POSTGRES_URL is not set: run with url=$(scripts/ensure_postgres.sh) and "
                    "MXRAG_TEST_POSTGRES_URL=$url (make test does this)")
    return url


@pytest.fixture
def postgres_schema_url(postgres_url: str) -> Iterator[str]:
    """``postgres_url`` with a new, empty schema as its search path."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    engine = create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
        url = make_url(postgres_url).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        engine.dispose()


# A real Milvus 2.3.5 standalone (``milvus-server`` of the PyPI package ``milvus``, see
# tests/server/milvus_server.py) on free ports for the whole session, shared by the server and the
# distributed tests; skipped only where that package is not installed. The unpacked binaries are
# kept in pytest's cache folder.
@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[MilvusServer]:
    version = installed_version()
    if version is None:
        pytest.skip(f"the Milvus server is not installed: pip install milvus=={MILVUS_VERSION} "
                    "(its milvus-server is a Milvus standalone; make setup installs it)")
    cache = pytestconfig.cache.mkdir(f"milvus-{version}") if getattr(pytestconfig, "cache", None) else None
    try:
        with running_milvus(tmp_path_factory.mktemp("milvus"), bin_cache=cache) as server:
            yield server
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
