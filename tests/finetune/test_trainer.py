"""finetune_embedding and evaluate_embedding on a tiny BERT built at test time (real training on the
CPU), and the original's embedding_finetune program: evaluate, generate, fine-tune, evaluate again."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mx_rag.errors import ParameterError
from mx_rag.llm import Text2TextLLM
from mx_rag.reranker.local import LocalReranker
from mx_rag.tools.finetune import DataProcessConfig, TrainDataGenerator, evaluate_embedding, finetune_embedding
from mx_rag.utils.file_check import FileCheck

from .conftest import DOCS


def write_pairs(path: Path, pairs: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"query": q, "corpus": c}) + "\n" for q, c in pairs), encoding="utf-8")
    return path


CODES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]


def pairs_of_docs() -> list[tuple[str, str]]:
    """Code words that share no token with their passage: only training can tie them together."""
    return [(code, doc) for code, doc in zip(CODES, DOCS.values(), strict=True)]


def test_training_raises_recall_and_saves_a_loadable_model(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    data = write_pairs(tmp_path / "train_data.jsonl", pairs_of_docs())
    before = evaluate_embedding(str(tiny_encoder_dir), data)
    out = finetune_embedding(str(tiny_encoder_dir), data, tmp_path / "tuned", epochs=30, batch_size=6,
                             learning_rate=1e-3, seed=0)
    after = evaluate_embedding(str(out), data, name="tuned")
    assert before["cosine_accuracy@1"] < 0.5
    assert after["tuned_cosine_accuracy@1"] == 1.0
    assert set(before) >= {"cosine_accuracy@1", "cosine_recall@5", "cosine_ndcg@10", "cosine_map@100"}

    from mx_rag.embedding.local import TextEmbedding

    emb = TextEmbedding(str(out))
    vectors = np.asarray(emb.embed_documents(list(DOCS.values())))
    assert vectors.shape == (len(DOCS), 64)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_reads_and_refuses(tmp_path: Path, tiny_encoder_dir: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\n', encoding="utf-8")
    with pytest.raises(ParameterError, match=r"bad\.jsonl:1 is not a"):
        evaluate_embedding(str(tiny_encoder_dir), bad)
    data = write_pairs(tmp_path / "one.jsonl", [("q", "d")])
    with pytest.raises(ParameterError, match="too few distinct pairs"):
        finetune_embedding(str(tiny_encoder_dir), data, tmp_path / "out")
    with pytest.raises(ParameterError, match="batch_size"):
        finetune_embedding(str(tiny_encoder_dir), data, tmp_path / "out", batch_size=1)
    with pytest.raises(ParameterError, match="output_path"):
        finetune_embedding(str(tiny_encoder_dir), data, tmp_path / "no" / "such" / "dir")


@pytest.mark.slow
def test_embedding_finetune_program(llm: Text2TextLLM, reranker: LocalReranker, document_dir: Path,
                                    tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """The original's example/embedding_finetune/finetune.py, step by step, with mx_rag's trainer in
    place of its NPU-bound sentence-transformers calls: origin recall@5, generate pairs with
    DataProcessConfig(question_number=2, featured_percentage=0.8, llm_threshold_score=0.8,
    query_rewrite_number=1), fine-tune into <output>/embedding/1 (FileCheck.dir_check), recall again."""
    from tests.finetune.test_finetune_data import loader_mng

    generate_dataset_path = tmp_path / "dataset"
    generate_dataset_path.mkdir()
    held_back = [(f"Which text mentions {doc.split()[-1].strip('.')}?", doc) for doc in DOCS.values()]
    eval_data_path = write_pairs(tmp_path / "eval.jsonl", held_back)
    generator = TrainDataGenerator(llm, str(generate_dataset_path), reranker)
    split_doc_list = generator.generate_origin_document(str(document_dir), loader_mng=loader_mng())
    origin = evaluate_embedding(str(tiny_encoder_dir), eval_data_path, name="origin_model")
    config = DataProcessConfig(question_number=2, featured_percentage=0.8, llm_threshold_score=0.8,
                               query_rewrite_number=1)
    generator.generate_train_data(split_doc_list, config)
    output = tmp_path / "finetune_output" / "embedding" / "1"
    output.mkdir(parents=True)
    FileCheck.dir_check(str(output))
    finetune_embedding(str(tiny_encoder_dir), generate_dataset_path / "train_data.jsonl", output, epochs=10,
                       batch_size=4, learning_rate=1e-3)
    tuned = evaluate_embedding(str(output), eval_data_path, name="finetune_model")
    origin_recall, tuned_recall = origin["origin_model_cosine_recall@5"], tuned["finetune_model_cosine_recall@5"]
    assert 0.0 <= origin_recall <= 1.0 and 0.0 <= tuned_recall <= 1.0
    assert (output / "modules.json").is_file() and (output / "model.safetensors").is_file()
    rows = (generate_dataset_path / "train_data.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 2 * 10  # ceil(0.8 * 12) pairs kept, each with one rewrite
