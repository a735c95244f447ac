# SPDX-License-Identifier: Apache-2.0
"""The Milvus and openGauss stores import lazily: naming them loads no database client, and a
missing pymilvus is an ``ExtraNotInstalledError`` naming the extra."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pymilvus", "milvus_lite", "psycopg", "psycopg2", "faiss", "torch")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_naming_the_stores_loads_no_client_library() -> None:
    result = _run(
        "import sys, mx_rag\n"
        "from mx_rag.storage.document_store import ChunkModel, MilvusDocstore, OpenGaussDocstore\n"
        "from mx_rag.storage.vectorstore import OpenGaussDB, VectorStorageFactory\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_missing_pymilvus_names_the_extra() -> None:
    result = _run(
        "import sys; sys.modules['pymilvus'] = None\n"
        "from mx_rag.errors import ExtraNotInstalledError\n"
        "from mx_rag.storage.document_store import MilvusDocstore\n"
        "try:\n    MilvusDocstore(client=None)\nexcept ExtraNotInstalledError as exc:\n    print(exc)\n"
    )
    assert 'mxrag[milvus]' in result.stdout, result.stderr
