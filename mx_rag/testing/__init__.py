# SPDX-License-Identifier: Apache-2.0
"""Test helpers: a scripted OpenAI-compatible HTTP server (standard library only)."""

from mx_rag.testing.replies import TINY_PNG, Reply
from mx_rag.testing.scripted_server import RecordedRequest, ScriptedServer

__all__ = ["TINY_PNG", "RecordedRequest", "Reply", "ScriptedServer"]
