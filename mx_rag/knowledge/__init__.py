# SPDX-License-Identifier: Apache-2.0
"""Knowledge bases: the registry (``KnowledgeStore``), ``KnowledgeDB`` and file upload."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from mx_rag.knowledge.handler import FileHandlerError, FilesLoadInfo, delete_files, upload_dir, upload_files
    from mx_rag.knowledge.knowledge import KnowledgeDB
    from mx_rag.knowledge.models import DocumentModel, KnowledgeModel
    from mx_rag.knowledge.retriever import KnowledgeRetriever
    from mx_rag.knowledge.store import KnowledgeStore

_LAZY = {
    "KnowledgeStore": "mx_rag.knowledge.store",
    "KnowledgeDB": "mx_rag.knowledge.knowledge",
    "KnowledgeModel": "mx_rag.knowledge.models",
    "DocumentModel": "mx_rag.knowledge.models",
    "KnowledgeRetriever": "mx_rag.knowledge.retriever",
    "upload_files": "mx_rag.knowledge.handler",
    "upload_dir": "mx_rag.knowledge.handler",
    "delete_files": "mx_rag.knowledge.handler",
    "FilesLoadInfo": "mx_rag.knowledge.handler",
    "FileHandlerError": "mx_rag.knowledge.handler",
}

__all__ = [
    "DocumentModel",
    "FileHandlerError",
    "FilesLoadInfo",
    "KnowledgeDB",
    "KnowledgeModel",
    "KnowledgeRetriever",
    "KnowledgeStore",
    "delete_files",
    "upload_dir",
    "upload_files",
]

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
