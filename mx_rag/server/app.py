# SPDX-License-Identifier: Apache-2.0
"""``create_app``: the ``mxrag serve`` application.

Routes: the OpenAI-compatible API (``openai_api``), knowledge-base management (``kb_api``),
TEI-compatible ``/embed`` and ``/rerank`` (``tei_api``), MCP at ``/mcp`` (``mcp_api``, when the
``mcp`` package is installed), and ``/healthz`` (the process answers), ``/readyz`` (the stores
and the embedding model are usable) and ``/metrics`` (Prometheus text format); the web app at ``/`` (``webapp``).
"""

# No ``from __future__ import annotations``: FastAPI reads the annotations of the routes.

import logging
from typing import Any

from fastapi import FastAPI, Response

from mx_rag.app.answers import Answerer
from mx_rag.app.settings import ServerSettings
from mx_rag.errors import ParameterError
from mx_rag.llm.text2text import Text2TextLLM
from mx_rag.llm.urls import chat_url
from mx_rag.server import metrics
from mx_rag.server.auth import Authenticator
from mx_rag.server.errors import error_response, install_error_handling
from mx_rag.server.guard import Guard
from mx_rag.server.kb_api import kb_router
from mx_rag.server.openai_api import openai_router
from mx_rag.server.schema import ERROR_RESPONSE, KEYED_ERRORS, PUBLIC_ERRORS
from mx_rag.server.service import KnowledgeService
from mx_rag.server.tei_api import tei_router
from mx_rag.utils import tracing
from mx_rag.utils.common import MB

__all__ = ["app_from_environment", "chat_url", "create_app", "server_llm"]

logger = logging.getLogger(__name__)


def create_app(service: KnowledgeService, llm: Text2TextLLM) -> FastAPI:
    """The server's FastAPI app over ``service``'s knowledge bases, answering with ``llm``."""
    settings = service.settings
    auth = Authenticator(service.keys, service.local_principal(), local_mode=settings.local_only)
    app = FastAPI(title="mx_rag", version="1", docs_url=None, redoc_url=None)
    app.state.service, app.state.auth = service, auth
    service.jobs.start()  # heartbeats, and reaping the jobs of workers that died (at once, then every few seconds)
    upload = settings.upload
    install_error_handling(app, settings.max_body_mb * MB, upload.max_files * upload.max_file_mb * MB + MB)
    app.add_middleware(Guard, auth=auth)  # outside the body limit: no body is read before the key is checked
    app.add_middleware(metrics.RequestMetrics)  # outermost: it also counts the refusals of the two above
    tracing.observe(metrics.observe_stage)  # the stage histograms of /metrics

    app.include_router(openai_router(Answerer(service, llm), auth.current), responses=KEYED_ERRORS)
    app.include_router(kb_router(service, auth.current, auth.current_admin), responses=KEYED_ERRORS)
    _optional_routes(app, service, llm, auth)

    @app.get("/healthz", responses=PUBLIC_ERRORS)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", response_model=None, responses={**PUBLIC_ERRORS, 503: ERROR_RESPONSE})
    def readyz() -> Any:
        try:
            service.registry.get_all_knowledge_info(service.local_principal().user_id)
            service.vectors.count()
            service.chunks.count()
            service.embedding.embed_documents(["ready"])  # loads the model on the first call
        except Exception as exc:  # the reason goes to the log only: this answer needs no key
            logger.warning("not ready: %s: %s", type(exc).__name__, exc)
            return error_response(503, "not_ready", f"a store or the embedding model is not usable "
                                  f"({type(exc).__name__}; the server's log has the reason)")
        return {"status": "ready"}

    @app.get("/metrics", response_class=Response, responses={
        **PUBLIC_ERRORS, 200: {"content": {metrics.CONTENT_TYPE: {"schema": {"type": "string"}}},
                               "description": "Prometheus text format"}})
    def prometheus() -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    return app


def _optional_routes(app: FastAPI, service: KnowledgeService, llm: Text2TextLLM, auth: Authenticator) -> None:
    """The TEI routes, the web app, and MCP where its package is installed."""
    from mx_rag.server.webapp import mount_webapp

    app.include_router(tei_router(service, auth.current), responses=KEYED_ERRORS)
    mount_webapp(app)
    try:
        from mx_rag.server.mcp_api import mount_mcp
    except ImportError:
        logger.info("the mcp package is not installed: no /mcp endpoint")
    else:
        mount_mcp(app, service, llm, auth)


def server_llm(settings: ServerSettings, url: str) -> Text2TextLLM:
    """The server's LLM client for the chat URL (or base URL) ``url`` (``mx_rag.app.llm.llm_client``)."""
    from mx_rag.app.llm import llm_client

    llm: Text2TextLLM = llm_client(settings, url)
    return llm


def app_from_environment() -> FastAPI:
    """The app of one ``mxrag serve`` worker, from ``mxrag.toml`` and ``MXRAG_*`` variables (the
    command puts its options there, and the embedded LLM's URL in ``MXRAG_LLM__URL``)."""
    from mx_rag.app.settings import load_settings

    settings = load_settings()
    if settings.llm.url is None:
        raise ParameterError("MXRAG_LLM__URL is not set: start workers with `mxrag serve`, which sets it")
    llm = server_llm(settings, settings.llm.url)
    return create_app(KnowledgeService(settings, llm), llm)
