# SPDX-License-Identifier: Apache-2.0
"""The web app at ``/`` of ``mxrag serve``: static files shipped inside the package (no build step).

The page talks to the same API as every other client (``/v1/...``) with the API key the user
signs in with, so it can do nothing a key could not do through the API.
"""

# No ``from __future__ import annotations``: FastAPI reads the annotations of the routes.

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["STATIC_DIR", "mount_webapp"]

STATIC_DIR = Path(__file__).with_name("static")


def mount_webapp(app: FastAPI) -> None:
    """Serve ``index.html`` at ``/`` and the other static files under ``/static``."""

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
