"""The names this branch adds from the original's API reference import where the reference puts
them, and resolving them pulls in no torch, transformers, sentence-transformers or pymilvus."""

import subprocess
import sys

import pytest

HEAVY = ("torch", "faiss", "transformers", "sentence_transformers", "pymilvus", "psycopg")
NAMES = [
    ("mx_rag.embedding", "EmbeddingFactory"),
    ("mx_rag.embedding.local", "SparseEmbedding"),
    ("mx_rag.embedding.service", "CLIPEmbedding"),
    ("mx_rag.reranker", "RerankerFactory"),
    ("mx_rag.reranker.reranker_factory", "RerankerFactory"),
    ("mx_rag.reranker.local", "MixRetrieveReranker"),
    ("mx_rag.retrievers", "BMRetriever"),
    ("mx_rag.retrievers.bm_retriever", "BMRetriever"),
    ("mx_rag.retrievers.full_text_retriever", "FullTextRetriever"),
    ("mx_rag.document.splitter", "MarkdownTextSplitter"),
    ("mx_rag.graphrag", "GraphEvaluator"),
    ("mx_rag.graphrag.graph_evaluator", "GraphEvaluator"),
    ("mx_rag.utils.file_check", "FileCheck"),
    ("mx_rag.tools.finetune.generator", "TrainDataGenerator"),
    ("mx_rag.tools.finetune.generator", "DataProcessConfig"),
    ("mx_rag.tools.finetune.generator.eval_data_generator", "EvalDataGenerator"),
    ("mx_rag.transformer_adapter.modeling_bert_adapter", "enable_bert_speed"),
    ("mx_rag.transformer_adapter.modeling_roberta_adapter", "enable_roberta_speed"),
    ("mx_rag.transformer_adapter.modeling_xlm_roberta_adapter", "enable_xlm_roberta_speed"),
    ("mx_rag.transformer_adapter.modeling_clip_adapter", "enable_clip_speed"),
]


def test_all_resolve_without_heavy_imports() -> None:
    imports = "; ".join(f"from {module} import {name}" for module, name in NAMES)
    code = f"import sys; {imports}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert sorted(m for m in out.split() if m.split(".")[0] in HEAVY) == []


@pytest.mark.parametrize(("module", "name"), NAMES)
def test_listed_in_all(module: str, name: str) -> None:
    import importlib

    package = importlib.import_module(module)
    assert name in getattr(package, "__all__", [name])
