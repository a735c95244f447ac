# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the web app's browser tests.

Real parts only: ``mxrag serve``'s app (``create_app`` over a ``KnowledgeService`` with SQLite,
FAISS and the MiniLM embedding in a temporary folder) served by uvicorn on 127.0.0.1, answering
through the scripted OpenAI-compatible LLM server (it echoes the prompt, passages included), and
Debian's Chromium driven by Playwright. ``MXRAG_TEST_CHROMIUM`` names the browser (``make test``
sets it from ``scripts/ensure_chromium.sh``); without it every browser test skips. Playwright's own
browser download is never used.

``keyed``: a server with API keys (alice and bob, both admins of their own knowledge bases).
``local``: a server with no key (local mode). ``browser``: one Chromium for the module.
``Watched``: a page whose console errors and page errors are recorded, for tests to assert none.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mx_rag.llm import Text2TextLLM
from mx_rag.server.app import create_app
from mx_rag.server.runner import AppServer
from mx_rag.server.service import KnowledgeService
from mx_rag.server.settings import load_settings
from mx_rag.testing import ScriptedServer
from mx_rag.utils import ClientParam

ALICE, BOB = "alice01", "bobby02"
# Chromium logs every 4xx answer to fetch/XHR as a console error; a test that provokes one on
# purpose (a wrong key, an unsupported file) allows exactly that line.
REFUSED = re.compile(r"^Failed to load resource: the server responded with a status of (400|401)\b")


@dataclass
class Served:
    server: AppServer
    service: KnowledgeService
    keys: dict[str, str] = field(default_factory=dict)  # user id -> API key

    @property
    def url(self) -> str:
        return self.server.base_url + "/"


@dataclass
class Watched:
    """A page and the console errors and uncaught exceptions seen on it."""

    page: Any
    errors: list[str] = field(default_factory=list)

    def assert_clean(self, allow: re.Pattern[str] | None = None) -> None:
        left = [e for e in self.errors if allow is None or not allow.search(e)]
        assert not left, f"console errors or page errors: {left}"
        self.errors.clear()


def watch(page: Any) -> Watched:
    watched = Watched(page)
    page.on("console", lambda msg: msg.type == "error" and watched.errors.append(msg.text))
    page.on("pageerror", lambda exc: watched.errors.append(f"pageerror: {exc}"))
    page.set_default_timeout(30_000)
    return watched


@pytest.fixture(scope="module")
def llm_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def _serve(data: Path, llm: ScriptedServer, users: tuple[str, ...]) -> Iterator[Served]:
    service = KnowledgeService(load_settings(data_dir=data, upload={"max_file_mb": 2}))
    keys = {user: service.keys.create(user, admin=True) for user in users}
    chat = Text2TextLLM(base_url=llm.url("/v1/chat/completions"), model_name="m",
                        client_param=ClientParam(use_http=True, retries=0))
    try:
        with AppServer(create_app(service, chat), host="127.0.0.1", port=0) as server:
            yield Served(server, service, keys)
    finally:
        service.close()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory, llm_server: ScriptedServer) -> Iterator[Served]:
    yield from _serve(tmp_path_factory.mktemp("keyed"), llm_server, (ALICE, BOB))


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, llm_server: ScriptedServer) -> Iterator[Served]:
    yield from _serve(tmp_path_factory.mktemp("local"), llm_server, ())


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = os.environ.get("MXRAG_TEST_CHROMIUM", "").strip()
    if not path:
        pytest.skip("MXRAG_TEST_CHROMIUM is not set: run with MXRAG_TEST_CHROMIUM=$(scripts/ensure_chromium.sh) "
                    "(make test does this; it needs Debian's chromium package)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed: pip install -e '.[dev]'")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


DESKTOP = {"width": 1280, "height": 860}


def open_page(browser: Any, served: Served, **context: Any) -> Watched:
    """A new browser context (its own storage) on the served page."""
    page = browser.new_context(viewport=context.pop("viewport", DESKTOP), **context).new_page()
    watched = watch(page)
    page.goto(served.url)
    return watched


def question(page: Any) -> Any:
    return page.get_by_role("textbox", name="Question")


def last_answer(page: Any) -> Any:
    """The last answer, once it has finished streaming."""
    answer = page.locator("article.assistant").last
    answer.and_(page.locator(":not([aria-busy])")).wait_for()
    return answer
