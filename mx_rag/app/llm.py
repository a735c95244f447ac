# SPDX-License-Identifier: Apache-2.0
"""The LLM client of the settings: one factory for the command line and the server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from mx_rag.app.settings import ServerSettings

__all__ = ["llm_client", "running_llm"]


def llm_client(settings: ServerSettings, url: str, model: str | None = None) -> Any:
    """A ``Text2TextLLM`` for the chat URL (or base URL) ``url`` with the settings' key and timeout;
    ``model`` defaults to ``[llm] model``."""
    from mx_rag.llm.text2text import Text2TextLLM
    from mx_rag.llm.urls import chat_url
    from mx_rag.utils import ClientParam

    key = settings.llm.api_key
    param = ClientParam(use_http=True, timeout=int(settings.llm.timeout),
                        api_key=None if key is None else key.get_secret_value())
    return Text2TextLLM(base_url=chat_url(url), model_name=model or settings.llm.model, client_param=param)


@contextmanager
def running_llm(settings: ServerSettings, url: str | None = None, model: str | None = None) -> Iterator[Any]:
    """The client of ``url`` or ``[llm] url``; without either, of the embedded LLM, started for the
    block (a few seconds) and stopped afterwards."""
    url = url or settings.llm.url
    embedded: Any = nullcontext()
    if url is None:
        from mx_rag.llm.local_server import LocalLLMServer

        embedded = LocalLLMServer(n_parallel=1)
    with embedded as server:
        if server is not None:
            yield llm_client(settings, server.chat_url, server.model_name)
        else:
            yield llm_client(settings, str(url), model)
