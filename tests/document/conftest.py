"""Fixtures for the loader tests: the real documents and a VLM on the scripted server."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_helpers import DOCS

from mx_rag.llm import Img2TextLLM
from mx_rag.testing import ScriptedServer
from mx_rag.utils import ClientParam


@pytest.fixture
def docs() -> Path:
    return DOCS


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def vlm(server: ScriptedServer) -> Img2TextLLM:
    param = ClientParam(use_http=True, retries=0, backoff=0, timeout=10)
    return Img2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="vl", client_param=param)
