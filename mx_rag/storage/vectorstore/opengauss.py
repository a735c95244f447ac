# SPDX-License-Identifier: Apache-2.0
"""``OpenGaussDB``: vectors in an openGauss table (its DataVec engine), or a PostgreSQL one with pgvector.

Both speak the same SQL for vectors (see ``_pgvector``), so the store runs on either through a
SQLAlchemy engine; the tests run it on PostgreSQL with pgvector. The database driver is imported
by SQLAlchemy when the engine connects, not when this module is imported.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.validation import check_filter, check_ids, check_k
from mx_rag.storage.vectorstore import _pgvector as sql_
from mx_rag.storage.vectorstore._validation import check_document_ids, check_sparse
from mx_rag.storage.vectorstore.vectorstore import SearchMode, VectorStore, as_matrix
from mx_rag.utils.checks import check_choice, check_instance, check_int, fail

__all__ = ["OpenGaussDB"]

logger = logging.getLogger(__name__)

DIALECTS = ("postgresql", "opengauss")
DEFAULT_SPARSE_DIM = 100_000
DENSE_MODES = (SearchMode.DENSE, SearchMode.HYBRID)
SPARSE_MODES = (SearchMode.SPARSE, SearchMode.HYBRID)


class OpenGaussDB(VectorStore):
    """Vectors in the table ``collection_name``: ``id`` (BIGINT key), ``document_id``, ``vector``
    (``vector(dense_dim)``) and/or ``sparse_vector`` (``sparsevec(sparse_dim)``), each with an index.

    Searches run in the database (``ORDER BY vector <#> query LIMIT k``) and honour
    ``filter_dict={"document_id": [...]}``; scores are scaled similarities (at most 1.0). The
    engine's pool gives every call its own connection, so one store may be shared by threads.

    Args:
        engine: a SQLAlchemy ``Engine`` on openGauss (``opengauss+psycopg2://``) or on PostgreSQL
            with the pgvector extension (``postgresql+psycopg://``); the store creates the extension
            when it is missing and the role may.
        collection_name: the table (a Python identifier, at most 63 ASCII characters).
        search_mode: ``SearchMode.DENSE``, ``SPARSE`` or ``HYBRID`` (both columns).
        index_type: ``"HNSW"`` or ``"IVFFLAT"`` for the dense column (sparse vectors get HNSW).
        metric_type: ``"IP"``, ``"L2"`` or ``"COSINE"`` for the dense column (sparse: IP).

    Example:
        >>> from sqlalchemy import create_engine
        >>> engine = create_engine("postgresql+psycopg://user:password@host:5432/db")
        >>> store = OpenGaussDB.create(engine=engine, dense_dim=128)
        >>> store.add([1, 2], vectors, document_id=7)
        >>> scores, ids = store.search(query_vectors, k=2, filter_dict={"document_id": [7]})
    """

    def __init__(self, engine: Engine, collection_name: str = "vectorstore",
                 search_mode: SearchMode = SearchMode.DENSE, index_type: str = "HNSW",
                 metric_type: str = "IP") -> None:
        self._engine: Engine = check_instance("engine", engine, Engine)
        if engine.dialect.name not in DIALECTS:
            raise fail("engine", engine, f"an Engine on openGauss or PostgreSQL (dialect in {list(DIALECTS)})")
        self._table = sql_.check_table_name(collection_name)
        self._mode: SearchMode = check_instance("search_mode", search_mode, SearchMode)
        self._index_type = check_choice("index_type", index_type, sql_.INDEX_TYPES)
        self._metric = check_choice("metric_type", metric_type, sql_.METRIC_TYPES)
        self._quote = engine.dialect.identifier_preparer.quote
        self._dense_dim: int | None = None
        self._sparse_dim: int | None = None
        self._lists = sql_.DEFAULT_LISTS
        self._iterative: bool | None = None  # whether pgvector has iterative scans (0.8 and later)

    @classmethod
    def create(cls, **kwargs: Any) -> OpenGaussDB:
        """Build a store and create (or open) its table; raises on any error (never returns None).

        Keyword arguments: those of the constructor, plus ``dense_dim``, ``sparse_dim`` and
        ``params`` of :meth:`create_collection`.
        """
        options = dict(kwargs)
        collection = {key: options.pop(key) for key in ("dense_dim", "sparse_dim", "params") if key in options}
        if "engine" not in options:
            raise ParameterError("OpenGaussDB.create needs engine (a SQLAlchemy Engine)")
        try:
            inspect.signature(cls).bind(**options)
        except TypeError as exc:
            raise ParameterError(f"OpenGaussDB.create: {exc}") from exc
        store = cls(**options)
        store.create_collection(**collection)
        return store

    @property
    def search_mode(self) -> SearchMode:
        return self._mode

    @property
    def collection_name(self) -> str:
        return self._table

    # -- table ------------------------------------------------------------------------------------

    def create_collection(self, dense_dim: int | None = None, sparse_dim: int = DEFAULT_SPARSE_DIM,
                          params: dict[str, Any] | None = None) -> None:
        """Create the table and its indexes if missing (an existing table keeps its dimensions).

        Args:
            dense_dim: dimension of dense vectors, 1 to 2000; needed in DENSE and HYBRID modes.
            sparse_dim: number of sparse dimensions (a vocabulary size; BGE-M3's is 250,002).
            params: index build parameters, ``{"dense": {"m": 16, "ef_construction": 64}}`` for
                HNSW or ``{"dense": {"lists": 200}}`` for IVFFLAT, ``{"sparse": {"m": ...}}``.
        """
        dense, sparse = sql_.check_build_params(params, self._index_type)
        columns = ["id BIGINT PRIMARY KEY", "document_id BIGINT NOT NULL"]
        if self._mode in DENSE_MODES:
            dim = check_int("dense_dim", dense_dim, 1, sql_.MAX_DENSE_DIM)
            columns.append(f"vector vector({dim})")
        if self._mode in SPARSE_MODES:
            columns.append(f"sparse_vector sparsevec({check_int('sparse_dim', sparse_dim, 1, sql_.MAX_SPARSE_DIM)})")
        q, table = self._quote, self._table
        statements = [f"CREATE TABLE IF NOT EXISTS {q(table)} ({', '.join(columns)})",
                      f"CREATE INDEX IF NOT EXISTS {q(table + '_document_id')} ON {q(table)} (document_id)"]
        if self._mode in DENSE_MODES:
            statements.append(sql_.index_ddl(q, table, "vector", "vector", self._index_type, self._metric, dense))
        if self._mode in SPARSE_MODES:
            statements.append(sql_.index_ddl(q, table, "sparse_vector", "sparsevec", "HNSW", "IP", sparse))
        with self._errors("creating the table"), self._engine.begin() as conn:
            self._ensure_extension(conn)
            conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:name))"), {"name": table})
            for statement in statements:
                conn.exec_driver_sql(statement)
        self._lists = dense.get("lists", sql_.DEFAULT_LISTS)
        self._dense_dim = self._sparse_dim = None

    def drop_collection(self) -> None:
        """Drop the table with its vectors and indexes."""
        with self._errors("dropping the table"), self._engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {self._quote(self._table)}")

    # -- writes -----------------------------------------------------------------------------------

    def add(self, ids: Sequence[int], embeddings: Any, document_id: int | Sequence[int] = 0) -> None:
        """Insert dense vectors (DENSE mode) under new ``ids``, in one transaction."""
        self._require((SearchMode.DENSE,), "add")
        vectors = as_matrix("embeddings", embeddings, self._dims()[0])
        self._insert(ids, {"vector": [sql_.dense_literal(v) for v in vectors]}, len(vectors), document_id)

    def add_sparse(self, ids: Sequence[int], sparse_embeddings: Any, document_id: int | Sequence[int] = 0) -> None:
        """Insert sparse ``{index: weight}`` vectors (SPARSE mode)."""
        self._require((SearchMode.SPARSE,), "add_sparse")
        rows = self._sparse_literals("sparse_embeddings", sparse_embeddings)
        self._insert(ids, {"sparse_vector": rows}, len(rows), document_id)

    def add_dense_and_sparse(self, ids: Sequence[int], dense_embeddings: Any, sparse_embeddings: Any,
                             document_id: int | Sequence[int] = 0) -> None:
        """Insert rows holding both a dense and a sparse vector (HYBRID mode)."""
        self._require((SearchMode.HYBRID,), "add_dense_and_sparse")
        vectors = as_matrix("dense_embeddings", dense_embeddings, self._dims()[0])
        sparse = self._sparse_literals("sparse_embeddings", sparse_embeddings, rows=len(vectors))
        literals = {"vector": [sql_.dense_literal(v) for v in vectors], "sparse_vector": sparse}
        self._insert(ids, literals, len(vectors), document_id)

    def delete(self, ids: Sequence[int]) -> int:
        """Delete rows by id; returns how many existed."""
        wanted = check_ids("ids", ids, allow_empty=True, unique=False).tolist()
        if not wanted:
            return 0
        statement = text(f"DELETE FROM {self._quote(self._table)} WHERE id = ANY(:ids)")
        with self._errors("deleting vectors"), self._engine.begin() as conn:
            return int(conn.execute(statement, {"ids": wanted}).rowcount)

    def update(self, ids: Sequence[int], dense: Any = None, sparse: Any = None) -> None:
        """Replace the dense and/or sparse vectors of existing ids (one transaction)."""
        if dense is None and sparse is None:
            raise ParameterError("update needs dense and/or sparse vectors")
        targets = check_ids("ids", ids).tolist()
        values: dict[str, list[str]] = {}
        if dense is not None:
            self._require(DENSE_MODES, "a dense update")
            matrix = as_matrix("dense", dense, self._dims()[0])
            values["vector"] = [sql_.dense_literal(v) for v in matrix]
        if sparse is not None:
            self._require(SPARSE_MODES, "a sparse update")
            values["sparse_vector"] = self._sparse_literals("sparse", sparse)
        for column, rows in values.items():
            if len(rows) != len(targets):
                raise ParameterError(f"ids has {len(targets)} ids but the {column} update has {len(rows)} rows")
        sets = ", ".join(f"{c} = CAST(:{c} AS {self._kind(c)})" for c in values)
        params = [{"id": i, **{c: rows[n] for c, rows in values.items()}} for n, i in enumerate(targets)]
        with self._errors("updating vectors"), self._engine.begin() as conn:
            found = set(self._present(conn, targets))
            missing = [i for i in targets if i not in found]
            if missing:
                raise ParameterError(f"ids are not in table {self._table!r}: {missing[:10]}")
            conn.execute(text(f"UPDATE {self._quote(self._table)} SET {sets} WHERE id = :id"), params)

    # -- reads ------------------------------------------------------------------------------------

    def search(self, embeddings: Any, k: int = 3,
               filter_dict: dict[str, Any] | None = None) -> tuple[list[list[float]], list[list[int]]]:
        """Top-``k`` (scores, ids) per query row, best first.

        Rows of ``{index: weight}`` dicts search ``sparse_vector`` (inner product), others ``vector``.
        """
        k = check_k(k)
        docs = check_filter(filter_dict)
        if isinstance(embeddings, (list, tuple)) and embeddings and all(isinstance(e, dict) for e in embeddings):
            self._require(SPARSE_MODES, "a sparse search")
            queries = self._sparse_literals("embeddings", embeddings)
            column, metric, method = "sparse_vector", "IP", "HNSW"
        else:
            self._require(DENSE_MODES, "a dense search")
            queries = [sql_.dense_literal(v) for v in as_matrix("embeddings", embeddings, self._dims()[0])]
            column, metric, method = "vector", self._metric, self._index_type
        if docs == []:
            return [[] for _ in queries], [[] for _ in queries]
        where = "WHERE document_id = ANY(:docs)" if docs else ""
        statement = text(
            f"SELECT id, {column} {sql_.OPERATOR[metric]} CAST(:query AS {self._kind(column)}) AS distance "
            f"FROM {self._quote(self._table)} {where} ORDER BY distance LIMIT :k"
        )
        scale = sql_.score_of(metric)
        scores: list[list[float]] = []
        ids: list[list[int]] = []
        with self._errors("searching"), self._engine.begin() as conn:
            settings = list(self._tuning(conn, method, k).items())
            if settings:  # one round trip for all of them
                calls = ", ".join(f"set_config(:name{i}, :value{i}, true)" for i in range(len(settings)))
                values = {f"{kind}{i}": item for i, pair in enumerate(settings) for kind, item in zip(
                    ("name", "value"), pair, strict=True)}
                conn.execute(text(f"SELECT {calls}"), values)
            for query in queries:
                params: dict[str, Any] = {"query": query, "k": k, **({"docs": docs} if docs else {})}
                rows = sorted(conn.execute(statement, params).all(),
                              key=lambda row: (float(row[1]), int(row[0])))
                scores.append([scale(float(row[1])) for row in rows])
                ids.append([int(row[0]) for row in rows])
        return scores, ids

    def get_all_ids(self) -> list[int]:
        """Every id, ascending."""
        with self._errors("listing ids"), self._engine.connect() as conn:
            return [int(i) for i in conn.exec_driver_sql(f"SELECT id FROM {self._quote(self._table)} ORDER BY id")
                    .scalars()]

    def count(self) -> int:
        with self._errors("counting vectors"), self._engine.connect() as conn:
            return int(conn.exec_driver_sql(f"SELECT count(*) FROM {self._quote(self._table)}").scalar_one())

    # -- internals --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            raise StorageError(f"{action} failed on table {self._table!r}: {exc}") from exc

    def _ensure_extension(self, conn: Connection) -> None:
        """PostgreSQL: create pgvector if it is missing (openGauss has its vector types built in)."""
        if self._engine.dialect.name != "postgresql":
            return
        if conn.exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'vector'").first() is None:
            try:
                with conn.begin_nested():
                    conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
            except SQLAlchemyError as exc:
                reason = getattr(exc, "orig", exc)
                raise StorageError("this PostgreSQL database lacks the pgvector extension and this role cannot "
                                   f"create it: run CREATE EXTENSION vector as a superuser ({reason})") from exc

    def _tuning(self, conn: Connection, method: str, k: int) -> dict[str, str]:
        if self._engine.dialect.name != "postgresql":
            return {}
        if self._iterative is None:
            version = conn.exec_driver_sql("SELECT extversion FROM pg_extension WHERE extname = 'vector'").scalar()
            parts = tuple(int(p) for p in str(version or "0.0").split(".")[:2] if p.isdigit())
            self._iterative = parts >= (0, 8)
        return sql_.tuning(method, k, self._lists, self._iterative)

    def _require(self, modes: tuple[SearchMode, ...], what: str) -> None:
        if self._mode not in modes:
            allowed = " or ".join(m.name for m in modes)
            raise ParameterError(f"{what} needs search_mode {allowed}, but this store is {self._mode.name}")

    def _kind(self, column: str) -> str:
        return "vector" if column == "vector" else "sparsevec"

    def _dims(self) -> tuple[int | None, int | None]:
        """(dense, sparse) dimensions of the table, read from the catalogue once."""
        if self._dense_dim is None and self._sparse_dim is None:
            # pg_class rather than to_regclass, which openGauss (PostgreSQL 9.2's catalogue) lacks
            query = text("SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                         "JOIN pg_class c ON a.attrelid = c.oid WHERE c.relname = :table "
                         "AND pg_table_is_visible(c.oid) AND a.attname IN ('vector', 'sparse_vector')")
            with self._errors("reading the table's dimensions"), self._engine.connect() as conn:
                for column, kind in conn.execute(query, {"table": self._table}):
                    dim = int(kind.split("(")[1].rstrip(")")) if "(" in kind else None
                    if column == "vector":
                        self._dense_dim = dim
                    else:
                        self._sparse_dim = dim
            if self._dense_dim is None and self._sparse_dim is None:
                raise StorageError(f"table {self._table!r} does not exist: call create_collection first")
        return self._dense_dim, self._sparse_dim

    def _sparse_literals(self, name: str, sparse: Any, rows: int | None = None) -> list[str]:
        checked = check_sparse(name, sparse, rows=rows)
        dim = self._dims()[1] or DEFAULT_SPARSE_DIM
        return [sql_.sparse_literal(row, dim, f"{name}[{n}]") for n, row in enumerate(checked)]

    def _present(self, conn: Connection, ids: list[int]) -> list[int]:
        statement = text(f"SELECT id FROM {self._quote(self._table)} WHERE id = ANY(:ids)")
        return [int(i) for i in conn.execute(statement, {"ids": ids}).scalars()]

    def _insert(self, ids: Sequence[int], literals: dict[str, list[str]], count: int,
                document_id: int | Sequence[int]) -> None:
        keys = check_ids("ids", ids, rows=count).tolist()
        docs = check_document_ids(document_id, count)
        columns = ", ".join(literals)
        values = ", ".join(f"CAST(:{c} AS {self._kind(c)})" for c in literals)
        statement = text(f"INSERT INTO {self._quote(self._table)} (id, document_id, {columns}) "
                         f"VALUES (:id, :document_id, {values})")
        params = [{"id": key, "document_id": docs[n], **{c: rows[n] for c, rows in literals.items()}}
                  for n, key in enumerate(keys)]
        try:
            with self._errors("adding vectors"), self._engine.begin() as conn:
                present = self._present(conn, keys)
                if present:
                    raise ParameterError(f"ids are already in table {self._table!r}: {sorted(present)[:10]}")
                conn.execute(statement, params)
        except StorageError as exc:
            if isinstance(exc.__cause__, IntegrityError):  # another writer added one of the ids meanwhile
                raise ParameterError(f"ids are already in table {self._table!r} (added concurrently)") from exc
            raise
