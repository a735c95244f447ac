# SPDX-License-Identifier: Apache-2.0
"""Optical character recognition for the loaders: RapidOCR (PP-OCR models in ONNX, shipped inside
its wheel, run by onnxruntime on the CPU).

* ``ocr_available()`` says whether the ``ocr`` extra is installed, without importing it.
* ``render_pdf(data, numbers)`` renders PDF pages with PDFium; ``image_text(data)`` reads an
  image file's bytes (icons and oversized images skipped).
* ``recognize(image)`` returns the text lines of one page image with their boxes, in the
  coordinates of the upright page, after turning a page scanned at 90, 180 or 270 degrees upright
  (``OcrPage.angle``). Lines are laid out by ``_layout.page_text``.
* The engine is built once per process (about 1 s) and shared; calls are serialized (the engine
  keeps per-call settings on itself). Images are scaled so that their longer side is at most
  ``MAX_SIDE`` pixels before recognition, so memory stays bounded whatever the page's size.

Nothing is downloaded: the models are files of the ``rapidocr`` wheel. ``lang`` is accepted for
the original's API; the one packaged recognition model reads Chinese and English alike.
"""

from __future__ import annotations

import importlib.util
import io
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from PIL import Image

from mx_rag.document.loader._layout import Line, page_text
from mx_rag.errors import DocumentError
from mx_rag.utils.lazy import check_extra, extra_import

__all__ = [
    "INSTALL_HINT", "MAX_SIDE", "PDFIUM_LOCK", "OcrPage", "image_text", "ocr_available", "recognize", "render_pdf",
    "require_ocr",
]

logger = logging.getLogger(__name__)

MAX_SIDE = 1600          # pixels of the longer side an image is scaled to (about 140 dpi on A4)
MIN_SCORE = 0.5          # recognition confidence under which a line is dropped
_SAMPLE_LINES = 8        # lines whose crops decide between 0 and 180 degrees
_DET_SIDE = 960          # pixels of the longer side for the orientation pass
RENDER_DPI = 200
_MODULES = ("rapidocr", "onnxruntime", "pypdfium2")
INSTALL_HINT = 'pip install "mxrag[ocr]"'

_lock = threading.Lock()
PDFIUM_LOCK = _lock  # PDFium is not thread-safe: every call into it in mx_rag holds this lock
_engine: Any = None


@dataclass
class OcrPage:
    """The recognized lines of one image (coordinates of the upright image) and its turn."""

    lines: list[Line]
    width: int
    height: int
    angle: int  # degrees the image was turned counterclockwise to stand upright


def ocr_available() -> bool:
    """True when the ``ocr`` extra (rapidocr and onnxruntime) is installed; imports nothing."""
    return all(importlib.util.find_spec(module) is not None for module in _MODULES)


def require_ocr() -> None:
    """Raise ``ExtraNotInstalledError`` naming ``mxrag[ocr]`` when the engine is missing."""
    check_extra("ocr", *_MODULES)


def _get_engine() -> Any:
    global _engine
    if _engine is None:
        with extra_import("ocr", *_MODULES, only=set(_MODULES)):
            from rapidocr import RapidOCR

        _engine = RapidOCR(params={"Global.log_level": "warning", "Global.max_side_len": MAX_SIDE})
    return _engine


def recognize(image: Image.Image, *, source: str) -> OcrPage:
    """The text lines of ``image`` (any mode, any size), upright, in no particular order."""
    import numpy as np

    rgb = _bounded(image.convert("RGB"))
    with _lock:
        engine = _get_engine()
        try:
            angle = _orientation(engine, rgb)
            upright = rgb.rotate(angle, expand=True) if angle else rgb
            result = engine(np.asarray(upright), use_det=True, use_cls=False, use_rec=True)
        except Exception as exc:
            raise DocumentError(f"OCR failed on {source}: {type(exc).__name__}: {exc}") from exc
    lines = []
    boxes = getattr(result, "boxes", None)
    if boxes is not None:
        for box, text, score in zip(boxes, result.txts, result.scores, strict=True):
            if score < MIN_SCORE or not text.strip():
                continue
            xs, ys = [float(p[0]) for p in box], [float(p[1]) for p in box]
            lines.append(Line(min(xs), min(ys), max(xs), max(ys), text.strip()))
    return OcrPage(lines, upright.width, upright.height, angle)


def _bounded(image: Image.Image) -> Image.Image:
    longer = max(image.size)
    if longer <= MAX_SIDE:
        return image
    scale = MAX_SIDE / longer
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS)


def _orientation(engine: Any, image: Image.Image) -> int:
    """0, 90, 180 or 270: the counterclockwise turn that puts the page's text upright.

    Text lines are found on a small copy: when most are taller than wide the page lies on its
    side. The direction (upside down or not) is the one in which the recognizer is the more
    confident over the longest lines, cut out of the full image and laid horizontal (PP-OCR's
    0/180 text-direction classifier was wrong on dense English pages).
    """
    import numpy as np

    scale = min(1.0, _DET_SIDE / max(image.size))
    small = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale)))) \
        if scale < 1 else image
    found = engine(np.asarray(small), use_det=True, use_cls=False, use_rec=False)
    boxes = getattr(found, "boxes", None)
    if boxes is None or len(boxes) == 0:
        return 0
    rects = []
    for box in boxes:
        xs, ys = [float(p[0]) for p in box], [float(p[1]) for p in box]
        rects.append((min(xs), min(ys), max(xs), max(ys)))
    tall = sum(1 for x0, y0, x1, y1 in rects if (y1 - y0) > 1.5 * (x1 - x0))
    wide = sum(1 for x0, y0, x1, y1 in rects if (x1 - x0) > 1.5 * (y1 - y0))
    sideways = tall > wide
    base = 90 if sideways else 0  # a page lying with its top to the right is turned 90 degrees counterclockwise
    longest = sorted(rects, key=lambda r: max(r[2] - r[0], r[3] - r[1]), reverse=True)[:_SAMPLE_LINES]
    votes = 0.0
    for x0, y0, x1, y1 in longest:  # cut from the full image: the classifier needs legible letters
        crop = image.crop((int(x0 / scale), int(y0 / scale), int(x1 / scale) + 1, int(y1 / scale) + 1))
        if sideways:
            crop = crop.rotate(base, expand=True)
        votes += _confidence(engine, crop.rotate(180)) - _confidence(engine, crop)
    upside_down = votes > 0
    return (base + (180 if upside_down else 0)) % 360


def _confidence(engine: Any, crop: Image.Image) -> float:
    """The recognizer's confidence in its reading of one line image (0 when it reads nothing)."""
    import numpy as np

    read = engine(np.asarray(crop), use_det=False, use_cls=False, use_rec=True)
    scores: Any = getattr(read, "scores", None)
    return float(scores[0]) if scores is not None and len(scores) else 0.0


def render_pdf(data: bytes, numbers: list[int], *, source: str) -> Iterator[tuple[int, Image.Image]]:
    """Yield (page number, image) for the 1-based page ``numbers`` of a PDF, each rendered at
    200 dpi or less so that its longer side is at most ``MAX_SIDE`` pixels (whatever the page's
    declared size), with the page's own rotation applied."""
    with extra_import("ocr", "pypdfium2", only={"pypdfium2"}):
        import pypdfium2

    with _lock:  # PDFium is not thread-safe
        try:
            document = pypdfium2.PdfDocument(data)
        except Exception as exc:
            raise DocumentError(f"{source!r} cannot be rendered for OCR: {type(exc).__name__}: {exc}") from exc
    try:
        for number in numbers:
            with _lock:
                try:
                    page = document[number - 1]
                    width, height = page.get_size()
                    scale = min(RENDER_DPI / 72, MAX_SIDE / max(width, height, 1.0))
                    image = page.render(scale=scale).to_pil()
                    page.close()
                except Exception as exc:
                    raise DocumentError(f"page {number} of {source!r} cannot be rendered for OCR: "
                                        f"{type(exc).__name__}: {exc}") from exc
            yield number, image
    finally:
        with _lock:
            document.close()


def image_text(data: bytes, *, source: str) -> tuple[str, int] | None:
    """(text, angle) read by OCR from an image file's bytes; None when the image is skipped:
    undecodable, over ``MAX_IMAGE_PIXELS``, icon-sized (both sides under 256 pixels) or wordless."""
    from mx_rag.document.loader._images import MAX_IMAGE_PIXELS, MIN_IMAGE_SIDE, image_info

    try:
        _, width, height = image_info(data)
        if width * height > MAX_IMAGE_PIXELS or (width < MIN_IMAGE_SIDE and height < MIN_IMAGE_SIDE):
            logger.debug("skipped a %dx%d image in %s for OCR", width, height, source)
            return None
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            page = recognize(image, source=source)
    except DocumentError:
        raise
    except Exception as exc:  # Pillow raises many types for bad bytes
        logger.warning("skipped an undecodable image in %s: %s", source, type(exc).__name__)
        return None
    text = page_text(page.lines, page.width)
    return (text, page.angle) if text else None
