# SPDX-License-Identifier: Apache-2.0
"""What every mx_rag app shares: a request-body limit and errors as one JSON shape.

Every error answer is ``{"error": {"code": "<word>", "message": "<one line>"}}`` (the shape
OpenAI clients parse) with a 4xx or 5xx status: 400 bad argument, 401 no or unknown key, 403 a
key without the right, 404 unknown knowledge base or document, 409 a name another user holds,
413 body over the limit, 422 a malformed body (the fields named, their values never echoed),
500 anything else (logged; its text not sent), 501 a feature whose optional dependencies the
server lacks (the extra to install named), 502 the LLM or another remote service failed.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from mx_rag.errors import ExtraNotInstalledError, KnowledgeError, MxRagError, ParameterError, RemoteError

__all__ = ["ApiError", "BodyLimit", "error_response", "install_error_handling"]

logger = logging.getLogger(__name__)

_MESSAGE_CHARS = 500


class ApiError(Exception):
    """An error answer with its status and code (raised by route code)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_response(status: int, code: str, message: str) -> JSONResponse:
    text = " ".join(message.split())[:_MESSAGE_CHARS]
    return JSONResponse({"error": {"code": code, "message": text}}, status_code=status)


def _status_of(exc: MxRagError) -> tuple[int, str]:
    if isinstance(exc, ParameterError):
        return 400, "invalid_argument"
    if isinstance(exc, KnowledgeError):
        text = str(exc)
        if "does not exist" in text or " has no " in text:
            return 404, "not_found"
        if "already exists" in text or "already in" in text:
            return 409, "conflict"
        if "is not an admin" in text:
            return 403, "forbidden"
        return 400, "knowledge_error"
    if isinstance(exc, RemoteError):
        return 502, "upstream_error"
    if isinstance(exc, ExtraNotInstalledError):
        return 501, "not_installed"
    return 500, "internal_error"


class BodyLimit:
    """ASGI middleware refusing a declared ``Content-Length`` over ``max_body_bytes`` with a 413
    (multipart uploads are limited per file as they stream). Plain ASGI: no task or queue per
    request, as ``@app.middleware("http")`` would cost."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app, self.max_body_bytes = app, max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            declared = headers.get(b"content-length", b"")
            multipart = headers.get(b"content-type", b"").startswith(b"multipart/")
            if not multipart and declared.isdigit() and int(declared) > self.max_body_bytes:
                response = error_response(413, "body_too_large", f"request body over {self.max_body_bytes} bytes")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def install_error_handling(app: FastAPI, max_body_bytes: int) -> None:
    """Refuse bodies over ``max_body_bytes`` (``BodyLimit``) and turn every error into the JSON
    shape above."""
    app.add_middleware(BodyLimit, max_body_bytes=max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for error in exc.errors()[:5]:
            where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
            parts.append(f"{where or 'body'}: {error.get('msg', 'invalid')}")
        return error_response(422, "invalid_request", "; ".join(parts))

    @app.exception_handler(HTTPException)  # starlette's: the router's 404/405, request.form()'s 400
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
        return error_response(exc.status_code, code, str(exc.detail))

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message)

    @app.exception_handler(MxRagError)
    async def _ours(request: Request, exc: MxRagError) -> JSONResponse:
        status, code = _status_of(exc)
        if status >= 500:
            logger.warning("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
            message = f"the request failed ({type(exc).__name__})" if status == 500 else str(exc)
            return error_response(status, code, message)
        return error_response(status, code, str(exc))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("%s %s failed", request.method, request.url.path)
        return error_response(500, "internal_error", f"the request failed ({type(exc).__name__})")
