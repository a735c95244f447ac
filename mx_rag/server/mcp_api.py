# SPDX-License-Identifier: Apache-2.0
"""MCP: the knowledge bases of ``mxrag serve`` (at ``/mcp``) and ``mxrag mcp`` (stdio) as tools.

=========================================================  ==========================================
``list_knowledge_bases()``                                 the knowledge bases the caller can use
``search(kb, query, k=5)``                                 chunks: text, source file, page, score
``ask(kb, question, chain=None)``                          an answer with its sources (configured chain)
``add_document(kb, filename, content_base64)``             upload a document and wait for its ingestion
=========================================================  ==========================================

Every call acts for one principal, resolved for each call: over streamable HTTP the bearer key
of the HTTP request that carries it (the same ``Authenticator`` as the REST routes: without keys
configured, the local user; with keys, a request without a valid key is answered 401 and a
key reaches only its own user's knowledge bases); over stdio the principal the command chose.
Adding a document needs an admin key and the admin role in the knowledge base. A refused or failed call is an
MCP tool error (``isError``) whose text is one line.

The HTTP endpoint is stateless (each POST stands alone, JSON answers), so any worker of a
multi-worker server can answer any request; the SDK's session manager is started lazily, on the
first request, in the event loop that serves it, since ``AppServer`` runs uvicorn without a
lifespan.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import logging
import math
import re
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any

import anyio
import anyio.to_thread
from fastapi import FastAPI
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from mx_rag.app.answers import Answerer, Question, source_entries
from mx_rag.app.chains import CHAIN_TYPES
from mx_rag.app.errors import kind_of
from mx_rag.app.users import Principal
from mx_rag.errors import KnowledgeError, MxRagError, ParameterError, PermissionDenied
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.text2text import Text2TextLLM
from mx_rag.server.auth import Authenticator
from mx_rag.server.errors import ApiError, error_response
from mx_rag.server.service import KBNAME_PATTERN, KnowledgeService, check_kb_name
from mx_rag.utils.common import MB

__all__ = ["MAX_K", "MAX_QUERY_CHARS", "build_server", "mount_mcp", "run_stdio"]

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
MAX_K = 100
MAX_QUERY_CHARS = 10_000  # of a search query or a question
ADD_WAIT_S = 600.0  # add_document waits this long for its ingestion job
_MESSAGE_CHARS = 500
_PYDANTIC_LINK = re.compile(r"\s*For further information visit \S+")

PrincipalOf = Callable[[Context], Principal]  # the principal one tool call acts for

KbArg = Annotated[str, Field(description="A knowledge base name, as list_knowledge_bases returns it.",
                             json_schema_extra={"pattern": KBNAME_PATTERN})]
QueryArg = Annotated[str, Field(description=f"What to search for (1 to {MAX_QUERY_CHARS} characters).",
                                json_schema_extra={"minLength": 1, "maxLength": MAX_QUERY_CHARS})]
QuestionArg = Annotated[str, Field(description=f"The question (1 to {MAX_QUERY_CHARS} characters).",
                                   json_schema_extra={"minLength": 1, "maxLength": MAX_QUERY_CHARS})]
KArg = Annotated[int, Field(description=f"How many chunks to return, 1 to {MAX_K}.",
                            json_schema_extra={"minimum": 1, "maximum": MAX_K})]
FilenameArg = Annotated[str, Field(description="The document's file name; its extension picks the loader "
                                               "(.pdf, .docx, .md, .txt, ...).")]
ContentArg = Annotated[str, Field(description="The file's bytes, base64-encoded.")]
ChainArg = Annotated[str | None, Field(
    description="How to answer: single, parallel, hybrid, multi-query, corag (several retrieval steps, for "
                "questions whose evidence is spread over passages) or graph (knowledge bases with a graph); "
                "default: the server's chain.type.")]


def one_line(text: str) -> str:
    """``text`` on one line, without pydantic's documentation links, at most 500 characters."""
    return " ".join(_PYDANTIC_LINK.sub("", text).split())[:_MESSAGE_CHARS]


def _refusal(exc: Exception) -> Exception:
    """A ToolError with the one-line text of an expected failure (bad argument, no such knowledge
    base, not an admin, the LLM failed: ``mx_rag.app.errors`` decides by type); any other error as it is."""
    if isinstance(exc, ApiError):
        return ToolError(one_line(exc.message))
    if not kind_of(exc).expected:
        return exc
    return ToolError(one_line(str(exc)))


def _check_text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{name} must be a non-empty string")
    if len(value) > MAX_QUERY_CHARS:
        raise ToolError(f"{name} must be at most {MAX_QUERY_CHARS} characters, got {len(value)}")
    return value


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ToolError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
    return k


def _check_kb(kb: Any) -> str:
    try:
        return check_kb_name(kb)
    except ParameterError as exc:
        raise _refusal(exc) from None


async def _one_line_errors(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: the text of a failed tool call on one line (pydantic's argument errors
    span several lines)."""
    result = await call_next(ctx)
    if ctx.method == "tools/call" and isinstance(result, dict) and result.get("isError"):
        for block in result.get("content") or []:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                block["text"] = one_line(block["text"])
    return result


def build_server(service: KnowledgeService, llm: Text2TextLLM, principal_of: PrincipalOf) -> MCPServer:
    """The MCP server over ``service``'s knowledge bases, answering with ``llm``; every tool call
    acts for ``principal_of(ctx)`` (which raises ``ToolError`` to refuse the call)."""
    from mx_rag import __version__

    answerer = Answerer(service, llm)
    settings = service.settings
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server: MCPServer = MCPServer(
        "mx_rag",
        version=__version__,
        instructions="Knowledge bases of documents: list them, search them for passages, ask questions "
                     "answered from them with sources, and add documents (admins of a knowledge base).",
        middleware=[_one_line_errors],
        log_level="WARNING",
    )
    root.handlers[:] = handlers  # the SDK's constructor calls logging.basicConfig: keep the process's logging
    root.setLevel(level)

    @server.tool(description="The names of the knowledge bases you can search and ask.")
    def list_knowledge_bases(ctx: Context) -> dict[str, Any]:
        who = principal_of(ctx)
        try:
            return {"knowledge_bases": service.names(who)}
        except MxRagError as exc:
            raise _refusal(exc) from None

    @server.tool(description="Search a knowledge base: the k passages closest to the query, each with its "
                             "text, source file name, page (where the file has pages) and score.")
    def search(ctx: Context, kb: KbArg, query: QueryArg, k: KArg = 5) -> dict[str, Any]:
        kb, query, k = _check_kb(kb), _check_text("query", query), _check_k(k)
        who = principal_of(ctx)
        try:
            docs = service.retriever(who, kb, k=k).invoke(query)
        except MxRagError as exc:
            raise _refusal(exc) from None
        found = [{"page_content": d.page_content, "metadata": d.metadata} for d in docs]
        return {"knowledge_base": kb, "chunks": source_entries({"source_documents": found})}

    @server.tool(description="Answer a question from a knowledge base with the server's LLM; the answer "
                             "comes with the passages it was given (text, source file, page, score).")
    def ask(ctx: Context, kb: KbArg, question: QuestionArg, chain: ChainArg = None) -> dict[str, Any]:
        kb, question = _check_kb(kb), _check_text("question", question)
        chain_type = settings.chain.type if chain is None else chain
        if chain_type not in CHAIN_TYPES:
            raise ToolError(f"chain must be one of {', '.join(CHAIN_TYPES)}, got {chain_type!r}")
        who = principal_of(ctx)
        asked = Question(question, [])
        config = LLMParameterConfig(max_tokens=settings.llm.max_tokens, temperature=settings.llm.temperature)
        try:
            chain = answerer.chain(who, kb, chain_type, asked, None)
            result = answerer.answer(chain, asked, config)
        except MxRagError as exc:
            raise _refusal(exc) from None
        return {"knowledge_base": kb, "answer": str(result.get("result", "")).strip(),
                "sources": source_entries(result)}

    @server.tool(description="Add a document to a knowledge base (you need its admin role) and wait until it "
                             "is ingested; a file of the same name is replaced.")
    def add_document(ctx: Context, kb: KbArg, filename: FilenameArg, content_base64: ContentArg) -> dict[str, Any]:
        kb = _check_kb(kb)
        who = principal_of(ctx)
        try:
            return _add_document(service, who, kb, filename, content_base64)
        except MxRagError as exc:
            raise _refusal(exc) from None

    return server


def _add_document(service: KnowledgeService, who: Principal, kb: str, filename: Any, content: Any) -> dict[str, Any]:
    service.require_admin(who, kb)  # before anything is kept: no such knowledge base, or only a member
    if not who.admin:
        raise PermissionDenied("adding documents needs an admin key (mxrag keys create USER --admin): "
                             "this key may only read and ask")
    if not isinstance(filename, str):
        raise ParameterError("filename must be a string")
    base = service.check_upload_name(filename)
    data = _decode(content, base, service.settings.upload.max_file_mb)
    staged = service.save_upload(who, kb, base, io.BytesIO(data))
    job = service.start_ingest(who, kb, {base: staged})
    deadline, pause = time.monotonic() + ADD_WAIT_S, 0.05
    while job.status not in ("done", "failed") and time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(pause * 2, 1.0)
        job = service.job(who, kb, job.id)
    if job.status == "failed":
        raise KnowledgeError(f"ingesting {base!r} failed: {job.error}")
    outcome = job.results.get(base, "")
    if outcome.startswith("failed"):
        raise KnowledgeError(f"{base!r} was not added: {outcome.partition(':')[2].strip() or outcome}")
    if job.status != "done":
        return {"knowledge_base": kb, "document": base, "status": job.status, "job": job.id,
                "note": f"still ingesting after {ADD_WAIT_S:.0f} s; it goes on in the background"}
    chunks = next((d["chunks"] for d in service.describe(who, kb)["documents"] if d["name"] == base), None)
    return {"knowledge_base": kb, "document": base, "status": outcome, "chunks": chunks, "job": job.id}


def _decode(content: Any, name: str, max_mb: int) -> bytes:
    if not isinstance(content, str):
        raise ParameterError("content_base64 must be a base64 string")
    text = "".join(content.split())
    if len(text) > 4 * math.ceil(max_mb * MB / 3):
        raise ParameterError(f"file {name!r} is over the upload limit of {max_mb} MiB")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ParameterError(f"content_base64 of {name!r} is not valid base64") from None


# -- streamable HTTP -------------------------------------------------------------------------------


def _http_principal(auth: Authenticator) -> PrincipalOf:
    def principal_of(ctx: Context) -> Principal:
        request = ctx.request_context.request
        if not isinstance(request, Request):
            raise ToolError("this call came without its HTTP request, so without an API key to act for")
        try:
            return auth.principal(request)
        except ApiError as exc:
            raise _refusal(exc) from None

    return principal_of


class _Endpoint:
    """The ASGI app at ``/mcp``: refuses a request without a valid key (when keys are configured)
    as the REST routes do, then hands it to the SDK's session manager, started on first use in
    the serving event loop (one manager per loop: a manager runs only once)."""

    def __init__(self, server: MCPServer, auth: Authenticator, options: dict[str, Any]) -> None:
        self._server, self._auth, self._options = server, auth, options
        self._lock = threading.Lock()
        self._running: dict[asyncio.AbstractEventLoop, tuple[Any, asyncio.Event, asyncio.Task[None]]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        try:
            await self._auth.current(Request(scope))  # Guard found it: no thread, no database
        except ApiError as exc:
            response = error_response(exc.status, exc.code, exc.message)
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        manager = await self._manager()
        await manager.handle_request(scope, receive, send)

    async def _manager(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            for old in [old for old in self._running if old.is_closed()]:
                del self._running[old]
            state = self._running.get(loop)
            if state is None:
                self._server.streamable_http_app(**self._options)  # makes a fresh session manager
                manager = self._server.session_manager
                ready = asyncio.Event()
                task = loop.create_task(_serve_manager(manager, ready), name="mx_rag-mcp-sessions")
                state = self._running[loop] = (manager, ready, task)
        manager, ready, task = state
        await ready.wait()
        if task.done():
            raise RuntimeError("the MCP session manager is not running (see the log)")
        return manager


async def _serve_manager(manager: Any, ready: asyncio.Event) -> None:
    """Run the session manager until the event loop ends (uvicorn cancels the task then)."""
    try:
        async with manager.run():
            ready.set()
            await anyio.sleep_forever()
    except Exception:
        logger.exception("the MCP session manager failed")
    finally:
        ready.set()  # waiting requests fail instead of hanging


def mount_mcp(app: FastAPI, service: KnowledgeService, llm: Text2TextLLM, auth: Authenticator) -> None:
    """Serve the MCP tools over streamable HTTP at ``/mcp`` in ``app``, each call acting for the
    bearer key of its request."""
    server = build_server(service, llm, _http_principal(auth))
    settings = service.settings
    options = {
        "streamable_http_path": MCP_PATH,
        "stateless_http": True,
        "json_response": True,
        "max_request_body_size": settings.max_body_mb * MB,
        "host": settings.host,  # 127.0.0.1 / localhost: the SDK's DNS-rebinding protection is on
    }
    app.router.routes.append(Route(MCP_PATH, endpoint=_Endpoint(server, auth, options)))


# -- stdio -----------------------------------------------------------------------------------------


def run_stdio(service: KnowledgeService, llm: Text2TextLLM, principal: Principal) -> None:
    """Serve the MCP tools over this process's stdin and stdout until stdin closes, every call
    acting for ``principal``. Nothing else may write to stdout meanwhile (the SDK points file
    descriptor 1 at stderr while it serves)."""

    def principal_of(ctx: Context) -> Principal:
        return principal

    build_server(service, llm, principal_of).run("stdio")
