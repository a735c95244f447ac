# SPDX-License-Identifier: Apache-2.0
"""``ImageLoader``: an image file as one Document, for image embedding or (with a VLM) as text.

Without ``vlm`` (the original's behaviour) the Document's text is the base64 of the file: it is
meant for an image knowledge base (``ImageEmbedding.embed_images`` as the upload ``embed_func``),
never for a text index. With ``vlm`` the text is the model's caption and the base64 goes to
``metadata["image_base64"]``, like the images found inside PDF, DOCX, PPTX and Markdown files.
With ``enable_ocr=True`` the text is what OCR reads in the image. ``LoaderMng.with_defaults()``
registers images only when it is given a ``vlm``, so a text knowledge base built without a vision
model keeps images out (``mxrag ingest`` lists them as skipped).
"""

from __future__ import annotations

import base64
import io
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from langchain_core.documents import Document
from PIL import Image

from mx_rag.document.loader._images import IMAGE_MIME, MAX_IMAGE_PIXELS, caption_image, image_info
from mx_rag.document.loader._ocr import image_text
from mx_rag.document.loader.base_loader import describe
from mx_rag.document.loader.picture_loader import PictureLoader
from mx_rag.errors import DocumentError
from mx_rag.utils.common import MB

if TYPE_CHECKING:
    from mx_rag.llm.img2text import Img2TextLLM

__all__ = ["ImageLoader"]

MAX_IMAGE_SIZE = 16 * MB


class ImageLoader(PictureLoader):
    """Load a ``.jpg``/``.jpeg``/``.png`` image as one Document.

    Without ``vlm``: ``page_content`` is the base64 of the raw file (for image embedding);
    ``metadata``: source, type "image", image_mime (from the content: a PNG named ``.jpg`` is
    sent as PNG). With ``vlm``: ``page_content`` is the caption, ``metadata`` adds
    ``image_base64`` (re-encoded as JPEG when above 2 MiB). Files above 16 MiB or 4096 x 4096
    pixels, and files that are not JPEG or PNG images, are refused.

    With ``enable_ocr`` (and no ``vlm``): ``page_content`` is the text read by OCR, ``type``
    "text", ``ocr`` True, ``rotation`` the degrees the image was turned to stand upright; an
    image with no readable text is refused.

    Args:
        file_path: the image file.
        vlm: an ``Img2TextLLM`` to caption the image, or None.
        enable_ocr: without ``vlm``, read the image's text by OCR (needs ``mxrag[ocr]``).

    Example:
        >>> from mx_rag.document.loader import ImageLoader
        >>> doc = ImageLoader("cat.png").load()[0]  # doctest: +SKIP
        >>> doc.metadata["type"]  # doctest: +SKIP
        'image'
    """

    SUFFIXES = (".jpg", ".jpeg", ".png")
    MAX_SIZE = MAX_IMAGE_SIZE

    def __init__(self, file_path: str | os.PathLike[str], vlm: Img2TextLLM | None = None, *,
                 enable_ocr: bool = False) -> None:  # the reference's signature: no lang
        super().__init__(file_path, vlm, enable_ocr=enable_ocr)

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
        if self.vlm is not None:
            yield self._captioned(data, width, height)
            return
        if self.enable_ocr:
            yield self._read(data)
            return
        metadata = {"source": self.file_path, "type": "image", "image_mime": IMAGE_MIME[fmt]}
        yield Document(page_content=base64.b64encode(data).decode("ascii"), metadata=metadata)

    def _read(self, data: bytes) -> Document:
        read = image_text(data, source=repr(self.file_path))
        if read is None:
            raise DocumentError(f"{self.file_path!r} has no text that OCR can read (or both its sides are under "
                                "256 pixels)")
        text, angle = read
        return self._text_document(text, ocr=True, rotation=angle, image_mime=IMAGE_MIME[image_info(data)[0]])

    def _captioned(self, data: bytes, width: int, height: int) -> Document:
        assert self.vlm is not None
        doc = caption_image(data, self.vlm, source=self.file_path)
        if doc is None:
            raise DocumentError(f"{self.file_path!r} ({width}x{height} pixels) got no caption: the VLM answered "
                                "nothing, or the image is icon-sized (both sides under 256 pixels)")
        return doc
