# SPDX-License-Identifier: Apache-2.0
"""docs/architecture.md names modules and names in them that exist."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def _resolve(dotted: str) -> object:
    """The module ``dotted`` names, or the attribute of the longest module prefix that imports."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(dotted)


def test_every_module_the_architecture_names_exists() -> None:
    names = set(re.findall(r"`(mx_rag(?:\.\w+)+)`", DOC.read_text(encoding="utf-8")))
    assert len(names) >= 15, names
    for name in sorted(names):
        assert _resolve(name) is not None, name


def test_the_ingest_and_query_entry_points_it_names_exist() -> None:
    from mx_rag.app.answers import Answerer, parse_model
    from mx_rag.app.errors import kind_of
    from mx_rag.app.service import KnowledgeService
    from mx_rag.errors import KnowledgeNotFound
    from mx_rag.graphrag import GraphRAGPipeline
    from mx_rag.knowledge.local import LocalKnowledge

    assert callable(KnowledgeService.ingest) and callable(GraphRAGPipeline.add_chunks)
    assert callable(LocalKnowledge.sync) and callable(Answerer.stream) and callable(parse_model)
    assert kind_of(KnowledgeNotFound("x")).status == 404
