# SPDX-License-Identifier: Apache-2.0
"""``Text2ImgChain``: generate an image from a text prompt."""

from __future__ import annotations

from typing import Any

from mx_rag.chain.base import Chain
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.text2img import Text2ImgMultiModel
from mx_rag.utils.checks import check_instance

__all__ = ["Text2ImgChain"]


class Text2ImgChain(Chain):
    """Text to image through a ``Text2ImgMultiModel``.

    Example:
        >>> chain = Text2ImgChain(multi_model=Text2ImgMultiModel(url=..., model_name="sd"))  # doctest: +SKIP
        >>> chain.query("dog wearing black glasses", output_format="jpg")["result"]         # doctest: +SKIP
    """

    def __init__(self, multi_model: Text2ImgMultiModel) -> None:
        self._multi_model = check_instance("multi_model", multi_model, Text2ImgMultiModel)

    def query(
        self, text: str, llm_config: LLMParameterConfig | None = None, *args: Any, **kwargs: Any
    ) -> dict[str, Any]:
        """``{"prompt": text, "result": <base64 image>}``.

        kwargs: ``output_format`` (png, jpeg, jpg, webp; default png) and ``size``
        (``"height*width"``, default ``"512*512"``). ``llm_config`` is accepted and unused.
        """
        if llm_config is not None:
            check_instance("llm_config", llm_config, LLMParameterConfig)
        return self._multi_model.text2img(
            prompt=text, output_format=kwargs.get("output_format", "png"), size=kwargs.get("size", "512*512")
        )
