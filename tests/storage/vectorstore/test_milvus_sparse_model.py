# SPDX-License-Identifier: Apache-2.0
"""MilvusDB's hybrid search fed by a real sparse model: ``SparseEmbedding`` (BGE-M3-style lexical
weights) on a tiny BERT built at test time, dense vectors from ``HashEmbedding``, on milvus-lite.
Skipped where ``SparseEmbedding`` is not part of mx_rag yet."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from mx_rag.storage.vectorstore import MilvusDB, SearchMode
from mx_rag.testing.hash_embedding import HashEmbedding

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("mx_rag.embedding.local.sparse_embedding") is None,
                       reason="mx_rag.embedding.local.SparseEmbedding is not in this tree"),
]

TEXTS = [
    "Milvus stores vectors and searches them",
    "PostgreSQL keeps rows in tables",
    "the cat sat on the mat",
    "sparse lexical weights come from the tokenizer",
]


@pytest.fixture(scope="module")
def sparse_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer BERT with MiniLM's tokenizer and a constant sparse head: every word token weighs 0.75."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from mx_rag.embedding.local.model_info import minilm_dir

    out = tmp_path_factory.mktemp("bge-m3-tiny")
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(minilm_dir())).save_pretrained(str(out))
    head = torch.nn.Linear(32, 1)
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.constant_(head.bias, 0.75)
    torch.save(head.state_dict(), out / "sparse_linear.pt")
    return out


def test_hybrid_search_with_sparse_embedding(milvus_client: Any, sparse_model_dir: Path) -> None:
    from mx_rag.embedding.local import SparseEmbedding

    sparse_model = SparseEmbedding(str(sparse_model_dir), dev_id=0)
    dense_model = HashEmbedding(dim=32)
    store = MilvusDB.create(client=milvus_client, collection_name="sparse_model", x_dim=32, metric_type="IP",
                            search_mode=SearchMode.HYBRID)
    lexical = sparse_model.embed_documents(TEXTS)
    assert all(isinstance(row, dict) and row for row in lexical)
    store.add_dense_and_sparse(list(range(len(TEXTS))), dense_model.embed_documents(TEXTS), lexical,
                               document_id=[0, 0, 1, 1], docs=TEXTS)
    question = "which tokenizer gives lexical weights"
    scores, ids = store.hybrid_search([dense_model.embed_query(question)], [sparse_model.embed_query(question)], k=2)
    assert ids[0][0] == 3 and scores[0][0] > scores[0][1]
    sparse_only = store.search([sparse_model.embed_query("cat mat")], k=1)
    assert sparse_only[1] == [[2]]
