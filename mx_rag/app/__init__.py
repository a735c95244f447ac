# SPDX-License-Identifier: Apache-2.0
"""The application layer under ``mxrag``, ``mxrag serve`` and MCP (see docs/architecture.md).

``settings`` (what a run is configured with), ``workspace`` (the stores of the settings),
``service`` (``KnowledgeService``: knowledge bases, documents, the one ingestion entry point),
``answers`` (``Answerer``: chains over the knowledge bases), ``llm`` (the LLM client of the
settings), ``errors`` (what each error means to HTTP, MCP and the command line) and ``users``.
The adapters (``mx_rag.server``, ``mx_rag.cli``) import from here; nothing here imports them.
Nothing is imported by ``import mx_rag``.
"""
