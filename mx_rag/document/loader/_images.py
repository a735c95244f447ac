# SPDX-License-Identifier: Apache-2.0
"""Captioning of images embedded in documents with a vision-language model (``Img2TextLLM``).

``caption_image(data, vlm, source=..., page=...)`` returns an image ``Document`` whose text is
the caption, or None when the image is skipped:

* images above 4096 x 4096 pixels, images with both sides under 256 pixels (icons, bullets,
  logos) and bytes Pillow cannot decode are skipped;
* the MIME type sent is the real one (png, jpeg, gif, webp, bmp); other formats are sent as PNG;
* when the base64 text would exceed 2 MiB the image is re-encoded as JPEG, downscaled step by
  step until it fits;
* an empty caption drops the image; a failure of the VLM raises ``DocumentError``.
"""

from __future__ import annotations

import base64
import io
import logging
import math
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from PIL import Image

from mx_rag.errors import DocumentError, RemoteError
from mx_rag.utils.checks import fail

if TYPE_CHECKING:
    from mx_rag.llm.img2text import Img2TextLLM

__all__ = ["IMAGE_MIME", "MAX_BASE64_SIZE", "MAX_IMAGE_PIXELS", "caption_image", "check_vlm", "image_info"]

logger = logging.getLogger(__name__)

MAX_IMAGE_PIXELS = 4096 * 4096
MIN_IMAGE_SIDE = 256
MAX_BASE64_SIZE = 2 * 1024 * 1024
_JPEG_QUALITY = 85
_MAX_SHRINK_STEPS = 8
IMAGE_MIME = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp", "BMP": "image/bmp"}


def check_vlm(vlm: Any) -> Img2TextLLM | None:
    """None, or an ``Img2TextLLM`` (imported only when a model is given)."""
    if vlm is None:
        return None
    from mx_rag.llm.img2text import Img2TextLLM

    if not isinstance(vlm, Img2TextLLM):
        raise fail("vlm", vlm, "None or an Img2TextLLM")
    return vlm


def image_info(data: bytes) -> tuple[str, int, int]:
    """(Pillow format, width, height) read from the header, without decoding the pixels.

    Raises on undecodable bytes (and Pillow refuses decompression bombs itself).
    """
    with Image.open(io.BytesIO(data)) as image:
        return str(image.format), image.width, image.height


def caption_image(data: bytes, vlm: Img2TextLLM, *, source: str, page: int | None = None) -> Document | None:
    """Caption one image; None when it is skipped (see the module docstring)."""
    where = f"{source!r}" + (f" page {page}" if page is not None else "")
    try:
        fmt, width, height = image_info(data)
    except Exception as exc:  # Pillow raises many types for bad bytes
        logger.warning("skipped an undecodable image in %s: %s", where, type(exc).__name__)
        return None
    if width * height > MAX_IMAGE_PIXELS:
        logger.warning("skipped a %dx%d image in %s: more than %d pixels", width, height, where, MAX_IMAGE_PIXELS)
        return None
    if width < MIN_IMAGE_SIDE and height < MIN_IMAGE_SIDE:
        logger.debug("skipped a %dx%d icon-sized image in %s", width, height, where)
        return None
    encoded = _encode(data, fmt)
    if encoded is None:
        logger.warning("skipped an image in %s: it could not be made smaller than %d bytes", where, MAX_BASE64_SIZE)
        return None
    mime, b64 = encoded
    try:
        caption = vlm.chat(image_url={"url": f"data:{mime};base64,{b64}"})
    except RemoteError as exc:
        raise DocumentError(f"the VLM could not caption an image in {where}: {' '.join(str(exc).split())}") from exc
    caption = caption.strip()
    if not caption:
        logger.debug("dropped an image in %s: the VLM answered an empty caption", where)
        return None
    metadata: dict[str, Any] = {"source": source, "type": "image", "image_base64": b64, "image_mime": mime}
    if page is not None:
        metadata["page"] = page
    return Document(page_content=caption, metadata=metadata)


def _b64_size(size: int) -> int:
    return 4 * ((size + 2) // 3)


def _encode(data: bytes, fmt: str) -> tuple[str, str] | None:
    """(mime, base64) within ``MAX_BASE64_SIZE``, re-encoding when needed; None if it cannot fit."""
    mime = IMAGE_MIME.get(fmt)
    if mime is not None and _b64_size(len(data)) <= MAX_BASE64_SIZE:
        return mime, base64.b64encode(data).decode("ascii")
    with Image.open(io.BytesIO(data)) as opened:
        image = _flatten(opened)
    if mime is None:  # e.g. TIFF: send PNG when it fits
        png = _save(image, "PNG")
        if _b64_size(len(png)) <= MAX_BASE64_SIZE:
            return "image/png", base64.b64encode(png).decode("ascii")
    return _shrink_to_jpeg(image)


def _flatten(image: Image.Image) -> Image.Image:
    """An RGB copy; transparent areas become white rather than black."""
    if image.mode in ("RGBA", "LA", "P", "PA"):
        rgba = image.convert("RGBA")
        background = Image.new("RGB", rgba.size, (255, 255, 255))
        background.paste(rgba, mask=rgba.getchannel("A"))
        return background
    return image.convert("RGB")


def _save(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    if fmt == "JPEG":
        image.save(buffer, format="JPEG", quality=_JPEG_QUALITY, optimize=True)
    else:
        image.save(buffer, format=fmt)
    return buffer.getvalue()


def _shrink_to_jpeg(image: Image.Image) -> tuple[str, str] | None:
    current = image
    for _ in range(_MAX_SHRINK_STEPS):
        jpeg = _save(current, "JPEG")
        size = _b64_size(len(jpeg))
        if size <= MAX_BASE64_SIZE:
            return "image/jpeg", base64.b64encode(jpeg).decode("ascii")
        scale = math.sqrt(MAX_BASE64_SIZE / size) * 0.9
        width, height = max(1, int(current.width * scale)), max(1, int(current.height * scale))
        current = image.resize((width, height), Image.Resampling.LANCZOS)
    return None
