# SPDX-License-Identifier: Apache-2.0
"""Rerankers behind HTTP services."""

from mx_rag.reranker.service.tei_reranker import TEIReranker

__all__ = ["TEIReranker"]
