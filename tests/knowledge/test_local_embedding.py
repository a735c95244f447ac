# SPDX-License-Identifier: Apache-2.0
"""A local knowledge base remembers the embedding model that built it, opens with it when none is
named, and refuses another one (before, a wrong ``--embedding`` gave nonsense answers without a
word)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mx_rag.embedding.local.model_info import minilm_dir
from mx_rag.errors import KnowledgeError
from mx_rag.knowledge.local import LocalKnowledge


def test_another_embedding_model_is_refused_by_name(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    LocalKnowledge.open(tmp_path / "kb", white_paths=[docs], embedding_model="all-MiniLM-L6-v2")
    same = "sentence-transformers/all-MiniLM-L6-v2"  # another spelling of the same model
    LocalKnowledge.open(tmp_path / "kb", white_paths=[docs], embedding_model=same)
    other = tmp_path / "my-encoder"
    other.symlink_to(minilm_dir(), target_is_directory=True)  # a model folder of another name
    with pytest.raises(KnowledgeError, match=r"built with the embedding model 'all-minilm-l6-v2' \(384 .*'my-encoder'"):
        LocalKnowledge.open(tmp_path / "kb", white_paths=[docs], embedding_model=str(other))
    LocalKnowledge.open(tmp_path / "kb", white_paths=[docs], knowledge_name="second", embedding_model=str(other))


def test_a_folder_opens_with_the_model_that_built_it(tmp_path: Path) -> None:
    """No model named: a MiniLM folder stays MiniLM (it would be locked out by a new default), and
    a new folder gets the default, multilingual-e5-small."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Harbour\n\nWool ships reached the harbour every spring.\n", encoding="utf-8")
    built = LocalKnowledge.open(tmp_path / "old", white_paths=[docs], embedding_model="all-MiniLM-L6-v2")
    assert built.sync([docs / "a.md"]).added
    reopened = LocalKnowledge.open(tmp_path / "old", white_paths=[docs])
    assert reopened.knowledge.knowledge_store.embedding_models() == ["all-minilm-l6-v2"]
    assert reopened.retriever(k=1).invoke("When did the wool ships come?")[0].page_content.startswith("# Harbour")
    fresh = LocalKnowledge.open(tmp_path / "new", white_paths=[docs])
    # the default model, with "@int8" on a CPU where the int8 extra is installed (tests/embedding/test_int8.py)
    expected = "multilingual-e5-small" + ("@int8" if fresh.embedding.int8 else "")
    assert fresh.knowledge.knowledge_store.embedding_models() == [expected]
    assert fresh.embedding.embed_query("harbour") != reopened.embedding.embed_query("harbour")
