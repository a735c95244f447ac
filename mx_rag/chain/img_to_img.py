# SPDX-License-Identifier: Apache-2.0
"""``Img2ImgChain``: retrieve the closest stored image for a description, then transform it."""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.retrievers import BaseRetriever

from mx_rag.chain.base import Chain
from mx_rag.llm.img2img import Img2ImgMultiModel
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.utils.checks import check_instance, check_str
from mx_rag.utils.common import MAX_PROMPT_LENGTH, TEXT_MAX_LEN

__all__ = ["Img2ImgChain"]

logger = logging.getLogger(__name__)


class Img2ImgChain(Chain):
    """Find an image by text (e.g. CLIP over images loaded with ``ImageLoader``), then send it
    with ``prompt`` to an ``Img2ImgMultiModel``.

    Example:
        >>> chain = Img2ImgChain(multi_model=model, retriever=image_retriever)      # doctest: +SKIP
        >>> chain.query("a boy", prompt="he is a knight, wearing armor")["result"]   # doctest: +SKIP
    """

    def __init__(self, multi_model: Img2ImgMultiModel, retriever: BaseRetriever) -> None:
        self._multi_model = check_instance("multi_model", multi_model, Img2ImgMultiModel)
        self._retriever = check_instance("retriever", retriever, BaseRetriever)

    def query(
        self, text: str, llm_config: LLMParameterConfig | None = None, *args: Any, **kwargs: Any
    ) -> dict[str, Any]:
        """``{"prompt": prompt, "result": <base64 image>}``; ``result`` is ``""`` when no image matches.

        kwargs: ``prompt`` (required, 1 to 1 MiB characters) and ``size`` (default ``"512*512"``).
        """
        check_str("text", text, 1, TEXT_MAX_LEN)
        prompt = check_str("prompt", kwargs.get("prompt"), 1, MAX_PROMPT_LENGTH)
        if llm_config is not None:
            check_instance("llm_config", llm_config, LLMParameterConfig)
        docs = self._retriever.invoke(text)
        if not docs:
            logger.warning("Img2ImgChain: no image matched the description")
            return {"prompt": prompt, "result": ""}
        return self._multi_model.img2img(
            prompt=prompt, image_content=docs[0].page_content, size=kwargs.get("size", "512*512")
        )
