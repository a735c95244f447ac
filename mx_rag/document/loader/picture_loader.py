# SPDX-License-Identifier: Apache-2.0
"""``PictureLoader``: the constructor shared by the loaders of files that hold pictures."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from langchain_core.documents import Document

from mx_rag.document.loader._images import caption_image, check_vlm
from mx_rag.document.loader._ocr import image_text
from mx_rag.document.loader.base_loader import BaseLoader, check_ocr
from mx_rag.utils.common import Lang

if TYPE_CHECKING:
    from mx_rag.llm.img2text import Img2TextLLM

__all__ = ["PictureLoader"]


class PictureLoader(BaseLoader):
    """Base of the loaders whose files hold pictures (PDF, PowerPoint, Word, images): a picture is
    captioned by ``vlm`` when one is given, else read by OCR when ``enable_ocr`` (in ``lang``)."""

    def __init__(
        self,
        file_path: str | os.PathLike[str],
        vlm: Img2TextLLM | None = None,
        lang: Lang = Lang.CH,
        enable_ocr: bool = False,
    ) -> None:
        super().__init__(file_path)
        self.enable_ocr = check_ocr(enable_ocr, lang)
        self.vlm = check_vlm(vlm)
        self.lang = lang

    def _picture_document(self, data: bytes, where: str, page: int | None = None) -> Document | None:
        """One picture as a Document: ``vlm``'s caption when there is a ``vlm``, else its OCR text;
        None when it gives none. ``where`` names the picture in messages ("a picture on slide 2 of ...")."""
        if self.vlm is not None:
            return caption_image(data, self.vlm, source=self.file_path, page=page)
        read = image_text(data, source=where)
        if read is None:
            return None
        return self._text_document(read[0], **({} if page is None else {"page": page}), ocr=True, image=True)
