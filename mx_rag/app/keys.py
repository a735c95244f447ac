# SPDX-License-Identifier: Apache-2.0
"""API keys of ``mxrag serve``: each key maps to a ``user_id``; admin keys manage keys.

A key is ``mxr_`` followed by 43 URL-safe characters (256 random bits), shown once when it is
created. Only its SHA-256 is stored (a salted slow hash buys nothing for random 256-bit secrets),
with a short prefix so that ``mxrag keys list`` can tell keys apart. The table ``api_keys`` lives
in the server's registry database.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import Boolean, DateTime, Engine, Integer, MetaData, String, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from mx_rag.app.users import Principal
from mx_rag.errors import KnowledgeError, StorageError
from mx_rag.knowledge.store import check_user_id, create_tables
from mx_rag.utils.checks import check_bool, check_str

__all__ = ["ApiKey", "KeyStore", "Principal"]

PREFIX = "mxr_"
SHOWN_CHARS = 10  # of the key, kept in clear to tell keys apart


class _Base(DeclarativeBase):
    metadata = MetaData()


class _KeyRow(_Base):
    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    shown: Mapped[str] = mapped_column(String(16))
    user_id: Mapped[str] = mapped_column(String(64), index=True)
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    name: Mapped[str] = mapped_column(String(128), default="")
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


@dataclass(frozen=True)
class ApiKey:
    """A stored key, without its secret."""

    id: int
    shown: str
    user_id: str
    admin: bool
    name: str
    created: datetime
    revoked: bool


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyStore:
    """The API keys in ``engine``'s database (table ``api_keys``, created if missing)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        create_tables(_Base.metadata, engine, "the api_keys table")

    def create(self, user_id: str, *, admin: bool = False, name: str = "") -> str:
        """Create a key for ``user_id`` and return it (the only time it is seen in clear)."""
        check_user_id(user_id)
        check_bool("admin", admin)
        check_str("name", name, 0, 128)
        key = PREFIX + secrets.token_urlsafe(32)
        row = _KeyRow(key_hash=_hash(key), shown=key[:SHOWN_CHARS], user_id=user_id, admin=admin, name=name,
                      created=datetime.now(timezone.utc), revoked=False)
        with self._session() as session:
            session.add(row)
        return key

    def authenticate(self, key: str) -> Principal | None:
        """The principal of a valid, unrevoked key; None otherwise."""
        if not isinstance(key, str) or not key.startswith(PREFIX) or len(key) > 128:
            return None
        with self._session() as session:
            row = session.scalar(select(_KeyRow).where(_KeyRow.key_hash == _hash(key), _KeyRow.revoked.is_(False)))
            return None if row is None else Principal(row.user_id, row.admin)

    def list(self) -> list[ApiKey]:
        with self._session() as session:
            rows = session.scalars(select(_KeyRow).order_by(_KeyRow.id)).all()
            return [ApiKey(r.id, r.shown, r.user_id, r.admin, r.name, r.created, r.revoked) for r in rows]

    def revoke(self, key_id: int) -> None:
        """Revoke key ``key_id`` (as listed); KnowledgeError if there is none."""
        with self._session() as session:
            done = session.execute(update(_KeyRow).where(_KeyRow.id == key_id).values(revoked=True))
            if not done.rowcount:  # type: ignore[attr-defined]
                raise KnowledgeError(f"there is no API key with id {key_id}")

    def any_active(self) -> bool:
        """Whether a key exists that is not revoked (no key: the server runs in local mode)."""
        with self._session() as session:
            return session.scalar(select(_KeyRow.id).where(_KeyRow.revoked.is_(False)).limit(1)) is not None

    @contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with Session(self._engine, expire_on_commit=False) as session, session.begin():
                yield session
        except SQLAlchemyError as exc:
            raise StorageError(f"the API key store failed: {exc}") from exc
