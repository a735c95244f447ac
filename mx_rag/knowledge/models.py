# SPDX-License-Identifier: Apache-2.0
"""Registry tables: knowledge bases with their members, and the documents in each."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import DateTime, Index, Integer, MetaData, String, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

ROLES = ("admin", "member")

READY = "ready"
PENDING = "pending"  # being added: chunks and vectors may be half written
DELETING = "deleting"  # being deleted: finish the deletion on repair
# A new version of a document is registered under knowledge_id = -<knowledge id> ("staged": no
# query of the knowledge base sees it) until its chunks and vectors are in; one transaction then
# removes the old row and moves the new one in, so after any crash one version is there.


def _now() -> datetime:
    return datetime.now(timezone.utc)


class RegistryBase(DeclarativeBase):
    # Own metadata, so the registry can share one SQLite file with a chunk store.
    metadata = MetaData()


class KnowledgeModel(RegistryBase):
    """One member of one knowledge base (a knowledge base has one row per member)."""

    __tablename__ = "knowledge_table"
    __table_args__ = (UniqueConstraint("knowledge_name", "user_id", name="uq_knowledge_user"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    knowledge_id: Mapped[int] = mapped_column(Integer, index=True)
    knowledge_name: Mapped[str] = mapped_column(String(1024), index=True)
    user_id: Mapped[str] = mapped_column(String(64), index=True)
    role: Mapped[str] = mapped_column(String(16))
    create_time: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class DocumentModel(RegistryBase):
    """One document of a knowledge base; ``document_id`` tags its chunks and vectors."""

    __tablename__ = "document_table"
    __table_args__ = (
        UniqueConstraint("knowledge_id", "document_file_path", name="uq_knowledge_file"),
        Index("ix_document_status", "status"),
        {"sqlite_autoincrement": True},
    )

    document_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    knowledge_id: Mapped[int] = mapped_column(Integer, index=True)
    knowledge_name: Mapped[str] = mapped_column(String(1024))
    document_name: Mapped[str] = mapped_column(String(1024), index=True)
    document_file_path: Mapped[str] = mapped_column(String(4096))
    status: Mapped[str] = mapped_column(String(16), default=READY)
    content_hash: Mapped[str | None] = mapped_column(String(64), nullable=True, default=None)
    # the previous version's id while its chunks and vectors are being removed after a replace
    replaces: Mapped[int | None] = mapped_column(Integer, nullable=True, default=None)
    create_time: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class EmbeddingRecord(RegistryBase):
    """The embedding model a knowledge base was built with (recorded by its first user)."""

    __tablename__ = "knowledge_embedding"

    knowledge_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    model: Mapped[str] = mapped_column(String(1024))
    dimension: Mapped[int] = mapped_column(Integer)


class RegistryGeneration(RegistryBase):
    """One row (``id`` 1) whose ``generation`` every change of documents or members increments, in
    the same transaction: a reader that sees the same number may keep what it read before."""

    __tablename__ = "registry_generation"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    generation: Mapped[int] = mapped_column(Integer, default=0)
