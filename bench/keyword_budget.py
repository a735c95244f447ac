# SPDX-License-Identifier: Apache-2.0
"""SQLite FTS5 keyword search over its row budget: cost and agreement with exact BM25.

On the cached stores of ``bench/query_scaling.py`` (``--sizes`` documents of 4 chunks, built by
it), the same 30 questions as there: ``SQLiteDocstore.full_text_search(q, top_k=20)`` (pruned
above ``full_text.ROW_BUDGET``; see ``Fts5Index``) against FTS5's exact BM25 over the OR of the
question's words (the SQL the store runs below the budget), in rotating order. Per pair budget
(``--pair-budgets``, ``full_text.PAIR_BUDGET``): the p50/p90 ms of both, ``cold`` being the first
pass of a new store object (new connections: SQLite's page cache empty) and ``warm`` the second,
and the mean overlap of the top 20 with the exact top 20.

Run::

    flock /tmp/mxrag-bench.lock python bench/keyword_budget.py --sizes 250000
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from pathlib import Path

from _harness import emit, environment, loadavg, ms, percentile, positive_int
from query_scaling import Corpus

from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.document_store import full_text as ft
from mx_rag.storage.document_store.text_tokens import fts5_match, query_tokens

TOP = 20
EXACT = ("SELECT rowid, -bm25(chunks_table_fts) AS s FROM chunks_table_fts WHERE chunks_table_fts MATCH ? "
         "ORDER BY s DESC, rowid LIMIT ?")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[250_000])
    parser.add_argument("--pair-budgets", type=positive_int, nargs="+", default=[ft.PAIR_BUDGET])
    parser.add_argument("--queries", type=positive_int, default=30)
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/mxrag-query-scaling"))
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    emit(environment("keyword_budget", row_budget=ft.ROW_BUDGET, rescored=ft.RESCORED, label=args.label,
                     loadavg=loadavg()))  # fmt: skip
    texts = Corpus(128).queries(args.queries)
    for documents in args.sizes:
        db = args.cache_dir / f"faiss-{documents}-d128" / "sql.db"
        SQLiteDocstore(db_path=db).close()  # adds the word counts to a store built before them
        raw = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        exact_top = [{row[0] for row in raw.execute(EXACT, (fts5_match(query_tokens(text)), TOP))} for text in texts]
        for budget in args.pair_budgets:
            ft.PAIR_BUDGET = budget
            store = SQLiteDocstore(db_path=db)
            line = {"bench": "keyword_budget", "chunks": documents * 4, "row_budget": ft.ROW_BUDGET,
                    "pair_budget": budget, "rescored": ft.RESCORED, "label": args.label}
            exact_ms: list[float] = []
            for rnd in ("cold", "warm"):
                times, overlap = [], []
                for text, expected in zip(texts, exact_top, strict=True):
                    start = time.perf_counter()
                    hits = store.full_text_search(text, top_k=TOP)
                    times.append(time.perf_counter() - start)
                    overlap.append(len({d.chunk_id for d in hits} & expected) / TOP)
                    start = time.perf_counter()  # the exact search in turn with the pruned one
                    raw.execute(EXACT, (fts5_match(query_tokens(text)), TOP)).fetchall()
                    exact_ms.append(time.perf_counter() - start)
                line[f"{rnd}_p50_ms"] = ms(percentile(times, 0.5))
                line[f"{rnd}_p90_ms"] = ms(percentile(times, 0.9))
                line["overlap_at_20"] = round(sum(overlap) / len(overlap), 3)
            store.close()
            emit({**line, "exact_p50_ms": ms(percentile(exact_ms, 0.5)), "exact_p90_ms": ms(percentile(exact_ms, 0.9)),
                  "loadavg": loadavg()})
        raw.close()


if __name__ == "__main__":
    main()
