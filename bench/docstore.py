# SPDX-License-Identifier: Apache-2.0
"""Benchmark ``SQLiteDocstore`` against LangChain's SQL store and the original's per-id lookups.

Every system gets the same chunks (default 20,000 of about 300 characters, half English, half
Chinese, built by a seeded shuffle of the Debian Reference sentences in
``tests/data/storage/``), each in a fresh SQLite file, in one process and one run:

* ``mx_rag``: ``SQLiteDocstore.add`` (one transaction, INSERT ... RETURNING, FTS5 rows) and
  ``search_many`` (one query);
* ``langchain``: ``langchain_community.storage.SQLStore`` wrapped by ``create_kv_docstore``
  (the SQL-backed docstore of LangChain's multi-vector retrievers): ``mset`` of ``(uuid,
  Document)`` and ``mget``. Skipped, with the reason, when it cannot be imported (it needs
  ``greenlet``, which SQLAlchemy 2.1 no longer installs);
* ``n_plus_1``: the original SDK's lookup pattern, one ``search`` per id.

Measured: ``bulk_add`` seconds and chunks per second (for mx_rag also ``of_which_tokenize_s``,
the time jieba and the word splitter take on the same chunks: LangChain's store keeps no
full-text index, so that part of the work is mx_rag's alone); ``lookup_10`` (fetch 10 random ids;
systems take turns, lookup by lookup) p50/p90 in ms; ``full_text`` (``full_text_search``,
top_k=5, English and Chinese questions) p50/p90 in ms for mx_rag. With ``--postgres-url`` the
same is run for ``PostgresDocstore`` (``mx_rag_pg``).

Output: JSON lines on stdout: the environment, one line per system and scenario, and summary
lines with ratios (peer time / mx_rag time: above 1 means mx_rag is faster).

Run::

    .venv/bin/python bench/docstore.py           # default: about 20 s
    .venv/bin/python bench/docstore.py --quick   # a few seconds
    .venv/bin/python bench/docstore.py --postgres-url "$(scripts/ensure_postgres.sh)"
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import random
import re
import sys
import tempfile
import uuid
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _harness import ROOT, emit, environment, ms, package_version, positive_int, timed

from mx_rag.storage.document_store import MxDocument, PostgresDocstore, SQLiteDocstore
from mx_rag.storage.document_store.text_tokens import index_tokens, tokenize

BENCH = "docstore"
DATA = ROOT / "tests" / "data" / "storage" / "debian_reference_excerpt.jsonl"
QUERIES = [
    "How do I switch between virtual consoles?",
    "proper shutdown procedure before the power is turned off",
    "boot manager NVRAM variables EFI system partition",
    "filesystem permissions for three categories of users",
    "怎样在虚拟控制台之间切换",
    "关机过程 电源 硬盘",
    "启动管理器 引导加载程序",
    "用户进程的定时任务",
]


def sentences() -> dict[str, list[str]]:
    pools: dict[str, list[str]] = {"en": [], "zh": []}
    for line in DATA.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        parts = re.split(r"(?<=[.。！？])\s*", rec["text"])
        pools[rec["lang"]].extend(p.strip() for p in parts if len(p.strip()) > 10)
    return pools


def make_chunks(count: int, seed: int = 7) -> list[MxDocument]:
    rng = random.Random(seed)
    pools = sentences()
    docs = []
    for i in range(count):
        pool = pools["en" if i % 2 == 0 else "zh"]
        text = " ".join(rng.sample(pool, 3)) + f" (chunk {i})"
        metadata = {"source": f"/docs/file{i // 100}.txt", "page": i % 50, "chunk": i}
        docs.append(MxDocument(text, metadata, f"file{i // 100}.txt"))
    return docs


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def n_plus_1(store: SQLiteDocstore, ids: Sequence[int]) -> list[MxDocument | None]:
    """The original SDK's lookup: one query per id."""
    return [store.search(i) for i in ids]


def langchain_store(path: Path) -> tuple[Any, str]:
    """LangChain's SQL-backed docstore on ``path``, or None and the reason."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from langchain_classic.storage import create_kv_docstore
            from langchain_community.storage import SQLStore
    except ImportError as exc:
        return None, f"langchain SQLStore unavailable: {exc}".splitlines()[0]
    sql_store = SQLStore(namespace="bench", db_url=f"sqlite:///{path}")
    sql_store.create_schema()
    return create_kv_docstore(sql_store), ""


class Systems:
    """The stores under test, filled with the same chunks."""

    def __init__(self, workdir: Path, docs: list[MxDocument], postgres_url: str | None) -> None:
        self.docs = docs
        self.lines: list[dict[str, Any]] = []
        self.mx = SQLiteDocstore(db_path=workdir / "mx.db")
        tokenize("预热 jieba")  # load jieba's dictionary outside the timings
        tokenize_s = timed(lambda: [index_tokens(doc.page_content) for doc in docs])[0]
        seconds, self.mx_ids = timed(lambda: self.mx.add(docs, document_id=1))
        self.add_line("mx_rag", seconds)
        self.lines[-1]["of_which_tokenize_s"] = round(tokenize_s, 3)
        self.lc, reason = langchain_store(workdir / "langchain.db")
        self.lc_keys = [str(uuid.uuid4()) for _ in docs]
        if self.lc is None:
            self.lines.append({"bench": BENCH, "scenario": "bulk_add", "system": "langchain", "skipped": reason})
        else:
            pairs = [(key, doc.to_langchain()) for key, doc in zip(self.lc_keys, docs, strict=True)]
            self.add_line("langchain", timed(lambda: self.lc.mset(pairs))[0])
        self.pg: PostgresDocstore | None = None
        if postgres_url:
            self.pg = PostgresDocstore(postgres_url, table_name=f"bench_{uuid.uuid4().hex[:12]}")
            seconds, self.pg_ids = timed(lambda: self.pg.add(docs, document_id=1))  # type: ignore[union-attr]
            self.add_line("mx_rag_pg", seconds)

    def add_line(self, system: str, seconds: float) -> None:
        self.lines.append({
            "bench": BENCH, "scenario": "bulk_add", "system": system, "chunks": len(self.docs),
            "seconds": round(seconds, 3), "chunks_per_s": round(len(self.docs) / seconds),
        })

    def lookups(self, rounds: int, rng: random.Random) -> dict[str, list[float]]:
        """Seconds per 10-id lookup, per system; systems take turns on the same positions."""
        times: dict[str, list[float]] = {}
        for _ in range(rounds):
            positions = rng.sample(range(len(self.docs)), 10)
            ids = [self.mx_ids[p] for p in positions]
            calls: dict[str, Callable[[], Any]] = {
                "mx_rag": functools.partial(self.mx.search_many, ids),
                "n_plus_1": functools.partial(n_plus_1, self.mx, ids),
            }
            if self.lc is not None:
                calls["langchain"] = functools.partial(self.lc.mget, [self.lc_keys[p] for p in positions])
            if self.pg is not None:
                calls["mx_rag_pg"] = functools.partial(self.pg.search_many, [self.pg_ids[p] for p in positions])
            order = list(calls)
            rng.shuffle(order)
            for system in order:
                seconds, found = timed(calls[system])
                if len(found) != 10:
                    raise SystemExit(f"{system} found {len(found)} of 10 chunks")
                times.setdefault(system, []).append(seconds)
        return times

    def full_text(self, rounds: int) -> dict[str, list[float]]:
        times: dict[str, list[float]] = {}
        stores: dict[str, SQLiteDocstore | PostgresDocstore] = {"mx_rag": self.mx}
        if self.pg is not None:
            stores["mx_rag_pg"] = self.pg
        for _ in range(rounds):
            for query in QUERIES:
                for system, store in stores.items():
                    seconds, hits = timed(functools.partial(store.full_text_search, query, top_k=5))
                    if not hits:
                        raise SystemExit(f"{system}: no hit for {query!r}")
                    times.setdefault(system, []).append(seconds)
        return times

    def close(self) -> None:
        self.mx.close()
        if self.pg is not None:
            with self.pg.engine.begin() as conn:
                conn.exec_driver_sql(f"DROP TABLE {self.pg.table_name}")
            self.pg.close()


def latency_lines(scenario: str, times: dict[str, list[float]]) -> list[dict[str, Any]]:
    lines = [
        {"bench": BENCH, "scenario": scenario, "system": system, "calls": len(values),
         "p50_ms": ms(percentile(values, 0.5)), "p90_ms": ms(percentile(values, 0.9))}
        for system, values in times.items()
    ]
    mx_p50 = percentile(times["mx_rag"], 0.5)
    ratios = {f"ratio_p50_{system}": round(percentile(v, 0.5) / mx_p50, 2) for system, v in times.items()
              if system != "mx_rag"}
    if ratios:
        lines.append({"bench": BENCH, "scenario": scenario, "system": "summary", **ratios})
    return lines


def environment_line(args: argparse.Namespace) -> dict[str, Any]:
    import sqlite3

    return environment(
        BENCH, sqlite=sqlite3.sqlite_version, mxrag=package_version("mxrag"),
        sqlalchemy=package_version("sqlalchemy"), langchain_community=package_version("langchain-community"),
        cpu_count=os.cpu_count(), platform=platform.platform(), chunks=args.chunks, lookups=args.lookups,
        fts_rounds=args.fts_rounds, postgres=bool(args.postgres_url),
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chunks", type=positive_int, default=20_000, help="chunks added to each store")
    parser.add_argument("--lookups", type=positive_int, default=500, help="10-id lookups per system")
    parser.add_argument("--fts-rounds", type=positive_int, default=25, help="rounds of the 8 full-text queries")
    parser.add_argument("--postgres-url", default=None, help="also run PostgresDocstore on this database")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2,000 chunks, 50 lookups, 3 rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.chunks, args.lookups, args.fts_rounds = 2_000, 50, 3
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    emit(environment_line(args))
    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="mxrag-bench-") as workdir:
        systems = Systems(Path(workdir), make_chunks(args.chunks), args.postgres_url)
        try:
            lines = systems.lines
            lines += latency_lines("lookup_10", systems.lookups(args.lookups, rng))
            lines += latency_lines("full_text", systems.full_text(args.fts_rounds))
        finally:
            systems.close()
    adds = {line["system"]: line["seconds"] for line in lines if line["scenario"] == "bulk_add" and "seconds" in line}
    if len(adds) > 1:
        lines.append({"bench": BENCH, "scenario": "bulk_add", "system": "summary",
                      **{f"ratio_{s}": round(v / adds["mx_rag"], 2) for s, v in adds.items() if s != "mx_rag"}})
    for line in lines:
        emit(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
