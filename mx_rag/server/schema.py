# SPDX-License-Identifier: Apache-2.0
"""The error answers of ``mxrag serve`` as its OpenAPI document publishes them.

Every error has the body ``ErrorBody`` (``{"error": {"code", "message"}}``, see ``errors``);
``KEYED_ERRORS`` are the answers any route behind a key can give besides its own: 400 a body
that could not be parsed, 401 no or unknown key, 403 a key without the right or a cross-site
request in local mode, 404 unknown knowledge base, document or job, 408 a stalled body, 413 a
body over the limit, 415 an unsupported media type, 421 a request for another host in local
mode, 422 a malformed body. ``PUBLIC_ERRORS`` are those of the routes that need no key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["ERROR_RESPONSE", "KEYED_ERRORS", "PUBLIC_ERRORS", "ErrorBody", "ErrorDetail"]


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


ERROR_RESPONSE: dict[str, Any] = {"model": ErrorBody, "description": "An error (see error.code)"}

PUBLIC_ERRORS: dict[int | str, dict[str, Any]] = {
    status: ERROR_RESPONSE for status in (400, 403, 408, 413, 421)
}
KEYED_ERRORS: dict[int | str, dict[str, Any]] = {
    status: ERROR_RESPONSE for status in (400, 401, 403, 404, 408, 409, 413, 415, 421, 422, 500, 501, 502, 503)
}
