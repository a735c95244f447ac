# SPDX-License-Identifier: Apache-2.0
"""Types shared by the CoRAG modules: retrieved documents and where they come from (defined in
``mx_rag.retrievers.sources``, which every retrieval path shares)."""

from mx_rag.retrievers.sources import DocumentSource, RetrievedDocument

__all__ = ["DocumentSource", "RetrievedDocument"]
