"""Helpers shared by the loader tests (imported by name: tests/document is on sys.path)."""

import io
from pathlib import Path

from PIL import Image

from mx_rag.testing import ScriptedServer

DOCS = Path(__file__).resolve().parent.parent / "data" / "docs"


def image_bytes(width: int, height: int, fmt: str = "PNG", color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A real encoded image: a coloured rectangle with a white diagonal line."""
    image = Image.new("RGB", (width, height), color)
    for i in range(min(width, height)):
        image.putpixel((i, i), (255, 255, 255))
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def sent_image_urls(server: ScriptedServer) -> list[str]:
    """The data URLs of the images the VLM received, in order."""
    return [request.json["messages"][-1]["content"][1]["image_url"]["url"] for request in server.requests]
