# SPDX-License-Identifier: Apache-2.0
"""A writer process for the kill -9 test: ``python sqlite_writer.py DB_PATH MODE``.

MODE ``mid``: start adding 3,000 chunks of 4 KiB (about 12 MiB, so SQLite spills pages into the
WAL before commit), print ``MID`` after the second INSERT batch and wait, inside the transaction.
MODE ``done``: add them, print ``DONE`` and wait. Either way the test then kills the process.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from sqlalchemy import event

from mx_rag.storage.document_store import MxDocument, SQLiteDocstore

CHUNKS = 3_000


def main(db_path: str, mode: str) -> None:
    store = SQLiteDocstore(db_path=db_path)
    inserts = 0

    def pause_mid_transaction(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        nonlocal inserts
        inserts += statement.startswith("INSERT")
        if mode == "mid" and inserts == 2:
            print("MID", flush=True)
            time.sleep(600)

    event.listen(store.engine, "after_cursor_execute", pause_mid_transaction)
    docs = [MxDocument(f"chunk {i} " + "x" * 4096, {"i": i}, "big.txt") for i in range(CHUNKS)]
    store.add(docs, document_id=2)
    print("DONE", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
