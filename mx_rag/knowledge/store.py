# SPDX-License-Identifier: Apache-2.0
"""``KnowledgeStore``: the registry of knowledge bases, their members and their documents."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, MetaData, and_, delete, func, inspect, or_, select, text, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from mx_rag.embedding.local.model_info import embedding_id
from mx_rag.errors import (
    KnowledgeConflict,
    KnowledgeError,
    KnowledgeNotFound,
    ParameterError,
    PermissionDenied,
    StorageError,
)
from mx_rag.knowledge.models import (
    DELETING,
    PENDING,
    READY,
    ROLES,
    DocumentModel,
    EmbeddingRecord,
    KnowledgeModel,
    RegistryBase,
    RegistryGeneration,
)
from mx_rag.storage.engines import postgres_engine, sqlite_engine
from mx_rag.utils.checks import check_bool, check_choice, check_int, check_str, fail
from mx_rag.utils.file_check import check_writable_parent
from mx_rag.utils.process_lock import AdvisoryLock, ProcessLock, lock_path_for

_GENERATION = select(RegistryGeneration.generation).where(RegistryGeneration.id == 1)
USER_ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{6,64}$")
MAX_NAME_LEN = 1024


def check_user_id(user_id: Any) -> str:
    if not isinstance(user_id, str) or not USER_ID_PATTERN.fullmatch(user_id):
        raise fail("user_id", user_id, "6 to 64 characters from [a-zA-Z0-9_-]")
    return user_id


# A new knowledge base's model when none is configured: TextEmbedding's DEFAULT_MODEL (kept here
# as a string so that reading it imports no embedding code).
DEFAULT_EMBEDDING = "multilingual-e5-small"


def choose_embedding(configured: str | None, recorded: Sequence[str]) -> str:
    """The embedding model to open a data folder with: ``configured`` when set; else the first
    built-in model among those its knowledge bases ``recorded`` (most used first), so a folder
    keeps answering with the model that built it; else ``DEFAULT_EMBEDDING``. A recorded model
    that is a folder of the user's is not guessed: opening its knowledge base names it."""
    if configured is not None:
        return configured
    from mx_rag.embedding.local.text_embedding import BUILTIN_MODELS

    builtin = {embedding_id(name): name for name in BUILTIN_MODELS}
    bases = [_base_id(m) for m in recorded]
    return next((builtin[base] for base in bases if base in builtin), DEFAULT_EMBEDDING)


def _base_id(model: str) -> str:
    from mx_rag.embedding.local.text_embedding import INT8_SUFFIX

    return embedding_id(model).removesuffix(INT8_SUFFIX)


def recorded_int8(model: str, recorded: Sequence[str]) -> bool | None:
    """Whether the vectors recorded for ``model`` (``recorded``, most used first) are int8: True,
    False (float), or None when the folder has none of that model (then the library's default holds).
    A folder keeps the variant it was built with, as it keeps its model."""
    base = embedding_id(model)
    return next((_base_id(m) != embedding_id(m) for m in recorded if _base_id(m) == base), None)


class KnowledgeStore:
    """Knowledge bases, who may use them (``admin`` or ``member`` per ``user_id``), and the
    documents each one holds. A user only sees knowledge bases in which they have a role.

    Args:
        db_path: SQLite file; created if missing. May be the same file as a ``SQLiteDocstore``.
        url: (keyword, instead of ``db_path``) a SQLAlchemy URL of a PostgreSQL database, for a
            registry that servers on several machines share (``postgresql+psycopg://...``).

    Writers take turns through ``write_lock()``: the lock file ``<db_path>.lock`` for SQLite, a
    PostgreSQL advisory lock for a database.

    Example:
        >>> store = KnowledgeStore(db_path="kb.db")            # doctest: +SKIP
        >>> store.add_knowledge("manuals", "Default", "admin")  # doctest: +SKIP
        1
    """

    def __init__(self, db_path: str | None = None, *, url: str | None = None) -> None:
        if (db_path is None) == (url is None):
            raise ParameterError("give KnowledgeStore one of db_path (a SQLite file) or url (a PostgreSQL database)")
        self.db_path: Path | None = None
        if url is None:
            self.db_path = check_writable_parent("db_path", db_path)
            self._engine = sqlite_engine(self.db_path, explicit_begin=False)  # ORM sessions: see there
            self.location = str(self.db_path)
        else:
            self._engine = postgres_engine(url, "url")[0]
            self.location = self._engine.url.render_as_string(hide_password=True)
        _create_schema(self._engine)
        self._sessions = sessionmaker(self._engine, expire_on_commit=False)
        self._id_lock = self.write_lock()

    def generation(self) -> int:
        """A number that changes with every change of documents or members (``KnowledgeRetriever``
        reads the ready documents again only when it has changed)."""
        try:
            with self._engine.connect() as connection:
                return int(connection.execute(_GENERATION).scalar() or 0)
        except SQLAlchemyError as exc:
            raise StorageError(f"knowledge registry {self.location!r} failed: {exc}") from exc

    def ready_document_ids(self, knowledge_name: str, user_id: str) -> list[int]:
        """The ids of the ready documents of a knowledge base the user belongs to, ascending."""
        with self._session() as session:
            member = self._require(session, knowledge_name, user_id, admin=False)
            query = (
                select(DocumentModel.document_id)
                .where(DocumentModel.knowledge_id == member.knowledge_id, DocumentModel.status == READY)
                .order_by(DocumentModel.document_id)
            )
            return list(session.scalars(query))

    def document_count(self) -> int:
        """How many documents the registry holds, of every knowledge base and in any state."""
        with self._session() as session:
            return int(session.scalar(select(func.count()).select_from(DocumentModel)) or 0)

    @property
    def engine(self) -> Engine:
        """The registry's database (the server keeps its API keys and upload jobs there too)."""
        return self._engine

    def write_lock(self, outer: Any = None) -> AbstractContextManager[Any]:
        """A new re-entrant lock that every writer of this registry, in any process, takes in turn;
        ``outer`` is taken before it."""
        if self.db_path is not None:
            return ProcessLock(lock_path_for(self.db_path), outer=outer)
        return AdvisoryLock(self._engine, f"mx_rag knowledge registry {self.location}", outer=outer)

    @contextmanager
    def _session(self, *, changes: bool = False) -> Iterator[Session]:
        """A transaction; ``changes``: it may change documents or members, so it increments the
        registry's generation (in the same transaction)."""
        try:
            with self._sessions.begin() as session:
                yield session
                if changes:
                    session.execute(
                        update(RegistryGeneration)
                        .where(RegistryGeneration.id == 1)
                        .values(generation=RegistryGeneration.generation + 1)
                    )
        except (KnowledgeError, ParameterError):
            raise
        except IntegrityError as exc:
            raise KnowledgeError(f"the knowledge registry refused the change: {exc.orig}") from exc
        except SQLAlchemyError as exc:
            raise StorageError(f"knowledge registry {self.location!r} failed: {exc}") from exc

    # -- knowledge bases and members -------------------------------------------------------------

    def add_knowledge(self, knowledge_name: str, user_id: str, role: str = "admin") -> int:
        """Create a knowledge base owned by ``user_id`` and return its id.

        Calling it again for a knowledge base the user already belongs to returns its id.
        Joining someone else's knowledge base needs ``add_usr_id_to_knowledge``.
        """
        check_str("knowledge_name", knowledge_name, 1, MAX_NAME_LEN)
        check_user_id(user_id)
        if role != "admin":
            raise fail("role", role, "'admin' (the creator of a knowledge base is its admin)")
        with self._id_lock, self._session(changes=True) as session:  # the new id is max + 1: one writer at a time
            rows = session.scalars(select(KnowledgeModel).where(KnowledgeModel.knowledge_name == knowledge_name)).all()
            if any(row.user_id == user_id for row in rows):
                return rows[0].knowledge_id
            if rows:
                raise KnowledgeConflict(
                    f"knowledge base {knowledge_name!r} already exists and {user_id!r} is not a member: "
                    "an admin must add them with add_usr_id_to_knowledge"
                )
            next_id = (session.scalar(select(func.max(KnowledgeModel.knowledge_id))) or 0) + 1
            session.add(KnowledgeModel(knowledge_id=next_id, knowledge_name=knowledge_name, user_id=user_id, role=role))
            return next_id

    def add_usr_id_to_knowledge(self, knowledge_name: str, user_id: str, role: str) -> None:
        """Give ``user_id`` a role in an existing knowledge base (no-op if they have it)."""
        check_user_id(user_id)
        check_choice("role", role, ROLES)
        with self._session(changes=True) as session:
            rows = self._members(session, knowledge_name)
            if not rows:
                raise KnowledgeNotFound(f"knowledge base {knowledge_name!r} does not exist")
            mine = [row for row in rows if row.user_id == user_id]
            if mine:
                mine[0].role = role
                return
            session.add(
                KnowledgeModel(
                    knowledge_id=rows[0].knowledge_id, knowledge_name=knowledge_name, user_id=user_id, role=role
                )
            )

    def delete_usr_id_from_knowledge(self, knowledge_name: str, user_id: str, role: str, force: bool = False) -> None:
        """Remove a member; the last member is kept unless ``force``."""
        check_user_id(user_id)
        check_choice("role", role, ROLES)
        check_bool("force", force)
        with self._session(changes=True) as session:
            rows = self._members(session, knowledge_name)
            mine = [row for row in rows if row.user_id == user_id and row.role == role]
            if not mine:
                raise KnowledgeNotFound(f"{user_id!r} has no role {role!r} in knowledge base {knowledge_name!r}")
            if len(rows) == 1 and not force:
                raise KnowledgeError(f"{user_id!r} is the last member of {knowledge_name!r}; pass force=True")
            session.delete(mine[0])
            if len(rows) == 1:  # the knowledge base is gone: so is its record (its id may be given again)
                session.execute(delete(EmbeddingRecord).where(EmbeddingRecord.knowledge_id == mine[0].knowledge_id))

    def check_embedding(self, knowledge_name: str, user_id: str, model: str, dimension: int) -> None:
        """Record the embedding model (a name or path) and dimension that build ``knowledge_name``
        on first use; later, refuse another one with a KnowledgeError naming both, since vectors
        of another model make retrieval return nonsense without any error."""
        check_str("model", model, 1, MAX_NAME_LEN)
        check_int("dimension", dimension, 1, 1 << 20)
        with self._session() as session:
            member = self._role(session, knowledge_name, user_id)
            if member is None:
                raise KnowledgeNotFound(f"knowledge base {knowledge_name!r} does not exist for {user_id!r}")
            row = session.get(EmbeddingRecord, member.knowledge_id)
            if row is None:
                session.add(EmbeddingRecord(knowledge_id=member.knowledge_id, model=model, dimension=dimension))
            elif _base_id(row.model) == _base_id(model) and embedding_id(row.model) != embedding_id(model):
                variant = "int8" if _base_id(row.model) != embedding_id(row.model) else "float"
                raise KnowledgeError(
                    f"knowledge base {knowledge_name!r} holds {variant} vectors of {row.model!r}, not {model!r}: "
                    f"open it with TextEmbedding(int8={variant == 'int8'}) (LocalKnowledge.open(int8=...)), or "
                    "make a new knowledge base and ingest the documents again to change the variant"
                )
            elif (embedding_id(row.model), row.dimension) != (embedding_id(model), dimension):  # any spelling
                raise KnowledgeError(
                    f"knowledge base {knowledge_name!r} was built with the embedding model {row.model!r} "
                    f"({row.dimension} dimensions), not {model!r} ({dimension}): use {row.model!r} "
                    "(--embedding, or [embedding] model), or make a new knowledge base for the other model"
                )

    def embedding_models(self) -> list[str]:
        """The embedding models recorded by ``check_embedding``, the one most knowledge bases use first."""
        count = func.count(EmbeddingRecord.knowledge_id)
        with self._session() as session:
            rows = session.execute(select(EmbeddingRecord.model, count).group_by(EmbeddingRecord.model)
                                   .order_by(count.desc(), EmbeddingRecord.model)).all()
        return [model for model, _ in rows]

    def check_knowledge_exist(self, knowledge_name: str, user_id: str) -> bool:
        check_user_id(user_id)
        with self._session() as session:
            return self._role(session, knowledge_name, user_id) is not None

    def get_all_knowledge_info(self, user_id: str) -> list[KnowledgeModel]:
        check_user_id(user_id)
        with self._session() as session:
            query = (
                select(KnowledgeModel).where(KnowledgeModel.user_id == user_id).order_by(KnowledgeModel.knowledge_id)
            )
            return list(session.scalars(query))

    def get_all_usr_role_by_knowledge(self, knowledge_name: str) -> dict[str, str]:
        with self._session() as session:
            return {row.user_id: row.role for row in self._members(session, knowledge_name)}

    def get_knowledge_id(self, knowledge_name: str, user_id: str) -> int:
        """The id of a knowledge base the user belongs to (KnowledgeError otherwise)."""
        with self._session() as session:
            return self._require(session, knowledge_name, user_id, admin=False).knowledge_id

    # -- documents -------------------------------------------------------------------------------

    def add_doc_info(
        self,
        knowledge_name: str,
        doc_name: str,
        file_path: str,
        user_id: str,
        status: str = READY,
        content_hash: str | None = None,
    ) -> int:
        """Register a document (admins only) and return its ``document_id``.

        A document is identified by its full ``file_path``: two ``a.pdf`` in different folders
        are two documents.
        """
        check_str("doc_name", doc_name, 1, MAX_NAME_LEN)
        check_str("file_path", file_path, 1, 4096)
        check_choice("status", status, (READY, PENDING))
        with self._session(changes=True) as session:
            member = self._require(session, knowledge_name, user_id, admin=True)
            if self._find_docs(session, member.knowledge_id, file_path):
                raise KnowledgeConflict(f"document {file_path!r} is already in knowledge base {knowledge_name!r}")
            return self._insert_doc(session, member.knowledge_id, knowledge_name, doc_name, file_path, status,
                                    content_hash)

    def delete_doc_info(self, knowledge_name: str, doc_name: str, user_id: str) -> int | None:
        """Remove a document's row (admins only); return its id, or None if it is not there."""
        with self._session(changes=True) as session:
            member = self._require(session, knowledge_name, user_id, admin=True)
            rows = self._one_doc(session, member.knowledge_id, doc_name)
            if not rows:
                return None
            session.delete(rows[0])
            return rows[0].document_id

    def check_document_exist(self, knowledge_name: str, doc_name: str, user_id: str) -> bool:
        with self._session() as session:
            member = self._require(session, knowledge_name, user_id, admin=False)
            return bool(self._one_doc(session, member.knowledge_id, doc_name, ready_only=True))

    def get_all_documents(self, knowledge_name: str, user_id: str) -> list[DocumentModel]:
        """The ready documents of a knowledge base the user belongs to."""
        with self._session() as session:
            member = self._require(session, knowledge_name, user_id, admin=False)
            query = (
                select(DocumentModel)
                .where(DocumentModel.knowledge_id == member.knowledge_id, DocumentModel.status == READY)
                .order_by(DocumentModel.document_id)
            )
            return list(session.scalars(query))

    def find_document(self, knowledge_name: str, doc_name: str, user_id: str) -> DocumentModel | None:
        """A document of the knowledge base by full path or, when unambiguous, by file name."""
        with self._session() as session:
            member = self._require(session, knowledge_name, user_id, admin=False)
            rows = self._one_doc(session, member.knowledge_id, doc_name)
            return rows[0] if rows else None

    def set_document_status(self, document_id: int | list[int], status: str) -> None:
        """Set the status of one document or of several in one transaction."""
        check_choice("status", status, (READY, PENDING, DELETING))
        ids = document_id if isinstance(document_id, list) else [document_id]
        with self._session(changes=True) as session:
            session.execute(update(DocumentModel).where(DocumentModel.document_id.in_(ids)).values(status=status))

    def remove_document(self, document_id: int) -> None:
        with self._session(changes=True) as session:
            session.execute(delete(DocumentModel).where(DocumentModel.document_id == document_id))

    def stage_document(
        self, knowledge_name: str, file_path: str, user_id: str, replaces: int, content_hash: str | None = None
    ) -> int:
        """Register a new version of document ``replaces``, staged (invisible) until ``commit_documents``."""
        check_str("file_path", file_path, 1, 4096)
        with self._session(changes=True) as session:
            member = self._require(session, knowledge_name, user_id, admin=True)
            return self._insert_doc(session, -member.knowledge_id, knowledge_name, os.path.basename(file_path),
                                    file_path, PENDING, content_hash, replaces)

    def stage_files(
        self, knowledge_name: str, user_id: str, files: list[tuple[str, str | None]]
    ) -> list[tuple[int, int | None]]:
        """Register ``files`` ((file path, content hash) each) in one transaction, all invisible
        until ``commit_documents``: a path not in the knowledge base gets a ``pending`` row, a
        path already there a staged version that replaces its row. Returns each file's document id
        and the id of the document it replaces (None for a new one)."""
        for i, (file_path, _) in enumerate(files):
            check_str(f"files[{i}]", file_path, 1, 4096)
        with self._session(changes=True) as session:
            member = self._require(session, knowledge_name, user_id, admin=True)
            kid = member.knowledge_id
            current: dict[str, int] = {}
            paths = [path for path, _ in files]
            for start in range(0, len(paths), 500):
                query = select(DocumentModel.document_file_path, DocumentModel.document_id).where(
                    DocumentModel.knowledge_id == kid, DocumentModel.document_file_path.in_(paths[start : start + 500])
                )
                current.update({path: doc_id for path, doc_id in session.execute(query)})
            return [
                (self._insert_doc(session, -kid if path in current else kid, knowledge_name, os.path.basename(path),
                                  path, PENDING, digest, current.get(path)), current.get(path))
                for path, digest in files
            ]

    def commit_documents(self, ready: list[int], promoted: list[int]) -> None:
        """One transaction: ``ready`` become ready; each staged document in ``promoted`` takes the
        place of the version it replaces (whose row goes; its chunks and vectors are removed next)."""
        with self._session(changes=True) as session:
            if ready:
                session.execute(update(DocumentModel).where(DocumentModel.document_id.in_(ready)).values(status=READY))
            for row in session.scalars(select(DocumentModel).where(DocumentModel.document_id.in_(promoted))):
                session.execute(delete(DocumentModel).where(DocumentModel.document_id == row.replaces))
                session.flush()
                row.knowledge_id, row.status = -row.knowledge_id, READY

    def interrupted_documents(self, knowledge_id: int) -> list[DocumentModel]:
        """In one query, what a crash may have left of knowledge base ``knowledge_id``: staged new
        versions (``knowledge_id`` negated), rows not ``ready``, and committed replacements whose
        old version may still have chunks and vectors (``replaces`` set)."""
        column = DocumentModel.knowledge_id
        query = select(DocumentModel).where(
            or_(
                column == -knowledge_id,
                and_(column == knowledge_id, or_(DocumentModel.status != READY, DocumentModel.replaces.is_not(None))),
            )
        )
        with self._session() as session:
            return list(session.scalars(query.order_by(DocumentModel.document_id)))

    def clear_replaces(self, document_ids: list[int]) -> None:
        with self._session() as session:
            session.execute(
                update(DocumentModel).where(DocumentModel.document_id.in_(document_ids)).values(replaces=None)
            )

    def unfinished_documents(self, knowledge_name: str, user_id: str) -> list[DocumentModel]:
        """Documents left ``pending`` or ``deleting`` by an interrupted add or delete."""
        with self._session() as session:
            member = self._require(session, knowledge_name, user_id, admin=False)
            query = select(DocumentModel).where(
                DocumentModel.knowledge_id == member.knowledge_id, DocumentModel.status != READY
            )
            return list(session.scalars(query))

    def all_document_ids(self) -> set[int]:
        """Every registered document id, of every knowledge base."""
        with self._session() as session:
            return set(session.scalars(select(DocumentModel.document_id)))

    # -- helpers ---------------------------------------------------------------------------------

    @staticmethod
    def _members(session: Session, knowledge_name: str) -> list[KnowledgeModel]:
        check_str("knowledge_name", knowledge_name, 1, MAX_NAME_LEN)
        query = select(KnowledgeModel).where(KnowledgeModel.knowledge_name == knowledge_name)
        return list(session.scalars(query.order_by(KnowledgeModel.id)))

    def _role(self, session: Session, knowledge_name: str, user_id: str) -> KnowledgeModel | None:
        return next((row for row in self._members(session, knowledge_name) if row.user_id == user_id), None)

    def _require(self, session: Session, knowledge_name: str, user_id: str, *, admin: bool) -> KnowledgeModel:
        check_user_id(user_id)
        member = self._role(session, knowledge_name, user_id)
        if member is None:
            raise KnowledgeNotFound(f"knowledge base {knowledge_name!r} does not exist for user {user_id!r}")
        if admin and member.role != "admin":
            raise PermissionDenied(f"{user_id!r} is not an admin of knowledge base {knowledge_name!r}")
        return member

    @staticmethod
    def _insert_doc(session: Session, knowledge_id: int, knowledge_name: str, doc_name: str, file_path: str,
                    status: str, content_hash: str | None, replaces: int | None = None) -> int:
        """Add a document row (a staged version has ``knowledge_id`` negated) and return its id."""
        row = DocumentModel(knowledge_id=knowledge_id, knowledge_name=knowledge_name, document_name=doc_name,
                            document_file_path=file_path, status=status, content_hash=content_hash,
                            replaces=replaces)
        session.add(row)
        session.flush()
        return row.document_id

    @staticmethod
    def _find_docs(session: Session, knowledge_id: int, file_path: str) -> list[DocumentModel]:
        query = select(DocumentModel).where(
            DocumentModel.knowledge_id == knowledge_id, DocumentModel.document_file_path == file_path
        )
        return list(session.scalars(query))

    def _one_doc(
        self, session: Session, knowledge_id: int, doc_name: str, *, ready_only: bool = False
    ) -> list[DocumentModel]:
        """Match a full path first; a bare file name must match exactly one document."""
        check_str("doc_name", doc_name, 1, 4096)
        rows = self._find_docs(session, knowledge_id, doc_name)
        if not rows and os.sep not in doc_name:
            query = select(DocumentModel).where(
                DocumentModel.knowledge_id == knowledge_id, DocumentModel.document_name == doc_name
            )
            rows = list(session.scalars(query))
            if len(rows) > 1:
                paths = sorted(row.document_file_path for row in rows)
                raise KnowledgeError(f"{doc_name!r} names several documents; use the full path, one of {paths}")
        if ready_only:
            rows = [row for row in rows if row.status == READY]
        return rows


_CREATE_RACE = re.compile(r"already exists|duplicate (column|key)")


def create_tables(metadata: MetaData, engine: Engine, what: str, then: Any = None) -> None:
    """Create ``metadata``'s missing tables (then run ``then(engine)``); a second process doing the
    same at once may win the race, which the second try sees. StorageError names ``what``."""
    for attempt in (1, 2):
        try:
            metadata.create_all(engine)
            if then is not None:
                then(engine)
            return
        except SQLAlchemyError as exc:
            if attempt == 2 or not _CREATE_RACE.search(str(getattr(exc, "orig", exc))):
                raise StorageError(f"cannot create {what}: {getattr(exc, 'orig', exc)}") from exc


def _create_schema(engine: Engine) -> None:
    create_tables(RegistryBase.metadata, engine, "the knowledge registry", then=_add_missing_columns)


def _add_missing_columns(engine: Engine) -> None:
    """Registries written by earlier versions lack ``content_hash`` and ``replaces`` (added in place)
    and the generation row (inserted; a process that finds it there leaves it)."""
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO registry_generation (id, generation) VALUES (1, 0) ON CONFLICT (id) DO NOTHING")
        )
    columns = {column["name"] for column in inspect(engine).get_columns("document_table")}
    for name, kind in (("content_hash", "VARCHAR(64)"), ("replaces", "INTEGER")):
        if name not in columns:
            with engine.begin() as connection:
                connection.execute(text(f"ALTER TABLE document_table ADD COLUMN {name} {kind}"))
