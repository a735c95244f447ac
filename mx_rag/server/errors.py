# SPDX-License-Identifier: Apache-2.0
"""What every mx_rag app shares: a request-body limit and errors as one JSON shape.

Every error answer is ``{"error": {"code": "<word>", "message": "<one line>"}}`` (the shape
OpenAI clients parse) with a 4xx or 5xx status: 400 bad argument, 401 no or unknown key, 403 a
key without the right, 404 unknown knowledge base or document, 409 a name another user holds,
408 a body that stalled, 413 body over the limit, 415 an upload not sent as multipart, 421 a
request for another host (local mode), 422 a malformed body (the fields named, their values never echoed),
500 anything else (logged; its text not sent), 501 a feature whose optional dependencies the
server lacks (the extra to install named), 502 the LLM or another remote service failed.
"""

from __future__ import annotations

import logging
import time

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mx_rag.app.errors import kind_of
from mx_rag.errors import MxRagError

__all__ = ["BODY_IDLE_S", "MIN_BODY_RATE", "ApiError", "BodyLimit", "error_response", "install_error_handling"]

logger = logging.getLogger(__name__)

_MESSAGE_CHARS = 500
BODY_IDLE_S = 10.0
MIN_BODY_RATE = 1024  # bytes per second, on average, once a body has taken BODY_IDLE_S
_HTTP_CODES = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed", 408: "request_timeout",
               413: "body_too_large", 415: "unsupported_media_type"}


class ApiError(Exception):
    """An error answer with its status and code (raised by route code)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_response(status: int, code: str, message: str) -> JSONResponse:
    text = " ".join(message.split())[:_MESSAGE_CHARS]
    return JSONResponse({"error": {"code": code, "message": text}}, status_code=status)


class _BodyRefused(HTTPException):
    """Raised from ``receive`` when a body is over the limit (413) or too slow (408); the routes'
    error handling answers it, or ``BodyLimit`` does where nothing else did."""


class BodyLimit:
    """ASGI middleware bounding request bodies: a declared ``Content-Length`` over the limit is
    refused with 413 before anything is read; every body is counted as it streams (chunked ones
    too) and cut off at the limit with 413; a client that sends nothing for ``BODY_IDLE_S``
    seconds, or under ``MIN_BODY_RATE`` bytes per second once its body has taken that long, is
    answered 408. The limit is ``max_body_bytes``, or ``max_upload_bytes`` for
    ``multipart/form-data`` (uploads, whose files are also limited one by one as they stream).
    Plain ASGI: no task or queue per request, as ``@app.middleware("http")`` would cost."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, max_upload_bytes: int | None = None) -> None:
        self.app, self.max_body_bytes = app, max_body_bytes
        self.max_upload_bytes = max_body_bytes if max_upload_bytes is None else max_upload_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        multipart = headers.get(b"content-type", b"").lower().startswith(b"multipart/")
        limit = self.max_upload_bytes if multipart else self.max_body_bytes
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await error_response(413, "body_too_large", f"request body over {limit} bytes")(scope, receive, send)
            return
        received, started, done, answering = 0, time.monotonic(), False, False

        async def limited() -> Message:
            nonlocal received, done
            if done:  # the body is read: what comes next is the disconnect, maybe much later
                return await receive()
            with anyio.move_on_after(BODY_IDLE_S) as waited:
                message = await receive()
            if waited.cancelled_caught:
                raise _BodyRefused(408, f"the request body stalled: nothing came for {BODY_IDLE_S:.0f} s")
            if message["type"] != "http.request":
                done = True
                return message
            received += len(message.get("body", b""))
            done = not message.get("more_body", False)
            if received > limit:
                raise _BodyRefused(413, f"request body over {limit} bytes")
            elapsed = time.monotonic() - started
            if not done and elapsed > BODY_IDLE_S and received < MIN_BODY_RATE * elapsed:
                raise _BodyRefused(408, f"the request body came slower than {MIN_BODY_RATE} bytes per second")
            return message

        async def sending(message: Message) -> None:
            nonlocal answering
            answering = answering or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, sending)
        except _BodyRefused as exc:  # raised where no error handler turned it into an answer
            if answering:
                raise
            response = error_response(exc.status_code, _HTTP_CODES[exc.status_code], str(exc.detail))
            response.headers["Connection"] = "close"
            await response(scope, receive, send)


def install_error_handling(app: FastAPI, max_body_bytes: int, max_upload_bytes: int | None = None) -> None:
    """Bound request bodies (``BodyLimit``) and turn every error into the JSON shape above."""
    app.add_middleware(BodyLimit, max_body_bytes=max_body_bytes, max_upload_bytes=max_upload_bytes)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for error in exc.errors()[:5]:
            where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
            parts.append(f"{where or 'body'}: {error.get('msg', 'invalid')}")
        return error_response(422, "invalid_request", "; ".join(parts))

    @app.exception_handler(HTTPException)  # starlette's: the router's 404/405, request.form()'s 400
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        response = error_response(exc.status_code, _HTTP_CODES.get(exc.status_code, "invalid_request"), str(exc.detail))
        response.headers.update(exc.headers or {})  # the Allow of a 405
        if exc.status_code in (408, 413):  # the rest of the body is not read
            response.headers["Connection"] = "close"
        return response

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message)

    @app.exception_handler(MxRagError)
    async def _ours(request: Request, exc: MxRagError) -> JSONResponse:
        kind = kind_of(exc)  # by type: mx_rag.app.errors holds the one table
        status, code = kind.status, kind.code
        if status >= 500:
            logger.warning("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
            message = f"the request failed ({type(exc).__name__})" if status == 500 else str(exc)
            return error_response(status, code, message)
        return error_response(status, code, str(exc))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("%s %s failed", request.method, request.url.path)
        return error_response(500, "internal_error", f"the request failed ({type(exc).__name__})")
