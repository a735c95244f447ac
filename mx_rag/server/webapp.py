# SPDX-License-Identifier: Apache-2.0
"""The web app at ``/`` of ``mxrag serve``: static files shipped inside the package (no build step).

The page talks to the same API as every other client (``/v1/...``) with the API key the user
signs in with, so it can do nothing a key could not do through the API. It is plain JavaScript
modules (``static/js``) and one stylesheet; the page is sent with a Content-Security-Policy that
allows only this origin's scripts, styles and connections (and ``data:`` images, for the images
a source carries), so text from documents can never run as code even if it reached the markup.
"""

# No ``from __future__ import annotations``: FastAPI reads the annotations of the routes.

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["PAGE_HEADERS", "STATIC_DIR", "mount_webapp"]

STATIC_DIR = Path(__file__).with_name("static")

PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def mount_webapp(app: FastAPI) -> None:
    """Serve ``index.html`` at ``/`` and the other static files under ``/static``."""

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers=PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
