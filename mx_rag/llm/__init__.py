# SPDX-License-Identifier: Apache-2.0
"""LLM and multimodal model clients (OpenAI-compatible chat, image generation).

Names are resolved on first access, so ``import mx_rag.llm`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.llm.img2img import Img2ImgMultiModel
    from mx_rag.llm.img2text import Img2TextLLM
    from mx_rag.llm.llm_parameter import LLMParameterConfig
    from mx_rag.llm.text2img import Text2ImgMultiModel
    from mx_rag.llm.text2text import Text2TextLLM

__all__ = ["Img2ImgMultiModel", "Img2TextLLM", "LLMParameterConfig", "Text2ImgMultiModel", "Text2TextLLM"]

__getattr__, __dir__ = lazy_package(globals())
