# SPDX-License-Identifier: Apache-2.0
"""``BuildEstimate``: what ``GraphRAGPipeline.build_graph`` will cost (``estimate_build``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BuildEstimate"]


@dataclass(frozen=True)
class BuildEstimate:
    """What ``build_graph`` will cost for the uploaded documents (token counts are approximate).

    Attributes:
        documents: uploaded documents that are new or changed.
        chunks: their chunks.
        chunks_to_extract: chunks whose text was never extracted before (the rest come from the
            cache).
        llm_calls: LLM calls (0 with the offline or a custom ``extractor``; JSON repair calls
            not counted).
        prompt_tokens / completion_tokens: approximate tokens sent and generated.
    """

    documents: int
    chunks: int
    chunks_to_extract: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
