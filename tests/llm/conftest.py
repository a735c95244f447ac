from collections.abc import Iterator

import pytest

from mx_rag.llm import Text2TextLLM
from mx_rag.testing import ScriptedServer
from mx_rag.utils import ClientParam


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def param() -> ClientParam:
    return ClientParam(use_http=True, retries=2, backoff=0, timeout=5)


@pytest.fixture
def llm(server: ScriptedServer, param: ClientParam) -> Text2TextLLM:
    return Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted", client_param=param)
