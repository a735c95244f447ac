# SPDX-License-Identifier: Apache-2.0
"""``ImageLoader``: an image file as one Document whose text is the base64 of the file."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator

from langchain_core.documents import Document
from PIL import Image

from mx_rag.document.loader._images import IMAGE_MIME, MAX_IMAGE_PIXELS, image_info
from mx_rag.document.loader.base_loader import BaseLoader, describe
from mx_rag.errors import DocumentError
from mx_rag.utils.common import MB

__all__ = ["ImageLoader"]

MAX_IMAGE_SIZE = 16 * MB


class ImageLoader(BaseLoader):
    """Load a ``.jpg``/``.jpeg``/``.png`` image as one Document for image embedding.

    ``page_content`` is the base64 of the raw file; ``metadata``: source, type "image",
    image_mime (from the content: a PNG named ``.jpg`` is sent as PNG). Files above 16 MiB or
    4096 x 4096 pixels, and files that are not JPEG or PNG images, are refused.

    Example:
        >>> from mx_rag.document.loader import ImageLoader
        >>> doc = ImageLoader("cat.png").load()[0]  # doctest: +SKIP
        >>> doc.metadata["type"]  # doctest: +SKIP
        'image'
    """

    SUFFIXES = (".jpg", ".jpeg", ".png")
    MAX_SIZE = MAX_IMAGE_SIZE

    def _load(self) -> Iterator[Document]:
        data = self._read_bytes()
        try:
            fmt, width, height = image_info(data)
            with Image.open(io.BytesIO(data)) as image:
                image.verify()  # structure and checksums, without decoding every pixel
        except Exception as exc:
            raise DocumentError(f"{self.file_path!r} is not a valid image: {describe(exc)}") from exc
        if fmt not in ("JPEG", "PNG"):
            raise DocumentError(f"{self.file_path!r} holds a {fmt} image; only JPEG and PNG are supported")
        if width * height > MAX_IMAGE_PIXELS:
            raise DocumentError(f"{self.file_path!r} is {width}x{height} pixels, more than the limit of "
                                f"4096x4096 ({MAX_IMAGE_PIXELS} pixels)")
        metadata = {"source": self.file_path, "type": "image", "image_mime": IMAGE_MIME[fmt]}
        yield Document(page_content=base64.b64encode(data).decode("ascii"), metadata=metadata)
