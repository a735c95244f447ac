# SPDX-License-Identifier: Apache-2.0
"""Document summaries with an LLM: ``Summary`` (``summarize``, ``merge_text_summarize``).

Names are resolved on first access, so ``import mx_rag.summary`` imports no HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.summary.summary import Summary

__all__ = ["Summary"]

__getattr__, __dir__ = lazy_package(globals())
