# SPDX-License-Identifier: Apache-2.0
"""A local knowledge base remembers the embedding model that built it and refuses another one
(before, a wrong ``--embedding`` gave nonsense answers without a word)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mx_rag.embedding.local._model_info import minilm_dir
from mx_rag.errors import KnowledgeError
from mx_rag.knowledge.local import LocalKnowledge


def test_another_embedding_model_is_refused_by_name(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    LocalKnowledge.open(tmp_path / "kb", white_paths=[docs])  # built with the default, MiniLM
    same = "sentence-transformers/all-MiniLM-L6-v2"  # another spelling of the same model
    LocalKnowledge.open(tmp_path / "kb", white_paths=[docs], embedding_model=same)
    other = tmp_path / "my-encoder"
    other.symlink_to(minilm_dir(), target_is_directory=True)  # a model folder of another name
    with pytest.raises(KnowledgeError, match=r"built with the embedding model 'all-minilm-l6-v2' \(384 .*'my-encoder'"):
        LocalKnowledge.open(tmp_path / "kb", white_paths=[docs], embedding_model=str(other))
    LocalKnowledge.open(tmp_path / "kb", white_paths=[docs], knowledge_name="second", embedding_model=str(other))
