"""The conformance suites shipped in ``mx_rag.testing``, as a third-party backend would use them.

Every suite runs on our own backends by subclassing: the vector-store and document-store suites in
tests/storage/, the graph-store suite in tests/graphrag/ (NetworkX and PostgreSQL). Here: that the
package exports them without importing pytest.
"""

from __future__ import annotations

import subprocess
import sys

import mx_rag.testing


def test_the_suites_are_exported_and_loaded_lazily() -> None:
    code = (
        "import sys, mx_rag.testing as t\n"
        "assert 'pytest' not in sys.modules, 'importing mx_rag.testing imported pytest'\n"
        "names = [t.VectorStoreConformance, t.DocstoreConformance, t.GraphStoreConformance]\n"
        "print(' '.join(n.__module__ for n in names))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["mx_rag.testing.vector_store", "mx_rag.testing.document_store",
                                  "mx_rag.testing.graph_store"]
    assert set(mx_rag.testing.__all__) >= {"VectorStoreConformance", "DocstoreConformance", "GraphStoreConformance"}
