# SPDX-License-Identifier: Apache-2.0
"""The one list of answer chains: ``[chain] type``, a chat model's ``kb/<chain>``, ``mxrag ask
--chain`` and MCP's ``ask`` read it (``mx_rag.app.answers`` builds them)."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["CHAIN_TYPES", "ChainType"]

ChainType = Literal["single", "parallel", "hybrid", "multi-query", "graph", "corag"]
CHAIN_TYPES: tuple[str, ...] = get_args(ChainType)
