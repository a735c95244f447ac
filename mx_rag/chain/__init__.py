# SPDX-License-Identifier: Apache-2.0
"""Chains: question answering (single, parallel, graph) and image generation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.chain.base import Chain
    from mx_rag.chain.graph_text_to_text import GraphRagText2TextChain
    from mx_rag.chain.img_to_img import Img2ImgChain
    from mx_rag.chain.parallel_text_to_text import ParallelText2TextChain
    from mx_rag.chain.single_text_to_text import SingleText2TextChain
    from mx_rag.chain.text_to_img import Text2ImgChain

__all__ = [
    "Chain",
    "GraphRagText2TextChain",
    "Img2ImgChain",
    "ParallelText2TextChain",
    "SingleText2TextChain",
    "Text2ImgChain",
]

__getattr__, __dir__ = lazy_package(globals())
