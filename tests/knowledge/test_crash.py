"""kill -9 in the middle of ingestion leaves stores that reopen consistent."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.knowledge.conftest import USER, open_stores

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_kill_during_uploads_then_reopen_is_consistent(tmp_path: Path) -> None:
    stores = open_stores(tmp_path)
    stores.knowledge_store.add_knowledge("test", USER)
    rng = random.Random(7)
    for round_ in range(6):
        proc = subprocess.Popen([sys.executable, "-m", "tests.knowledge.crash_worker", str(tmp_path)],
                                cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.2, 1.5))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()

        reopened = open_stores(tmp_path)
        kb = reopened.open()  # repairs what the kill left half done
        report = kb.check()
        assert report.ok, (round_, report)
        chunk_ids = set(reopened.chunk_store.get_all_chunk_id())
        assert chunk_ids == set(reopened.vector_store.get_all_ids()), round_
        docs = {d.document_id for d in kb.get_all_documents()}
        assert set(reopened.chunk_store.get_all_document_id()) == docs, round_
    assert docs, "the worker never finished a document"
