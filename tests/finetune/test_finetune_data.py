"""TrainDataGenerator, DataProcessConfig and EvalDataGenerator: documents loaded from disk, questions,
scores and rewrites from an OpenAI-compatible server on 127.0.0.1, selection with a real cross-encoder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter

from mx_rag.document import LoaderMng
from mx_rag.document.loader import DocxLoader
from mx_rag.errors import ParameterError
from mx_rag.llm import Text2TextLLM
from mx_rag.reranker.local import LocalReranker
from mx_rag.testing import ScriptedServer
from mx_rag.tools.finetune.generator import DataProcessConfig, EvalDataGenerator, TrainDataGenerator

from .conftest import DOCS


def loader_mng() -> LoaderMng:
    from langchain_community.document_loaders import TextLoader

    mng = LoaderMng()
    mng.register_loader(loader_class=TextLoader, file_types=[".txt", ".md"])
    mng.register_loader(loader_class=DocxLoader, file_types=[".docx"])
    mng.register_splitter(splitter_class=RecursiveCharacterTextSplitter, file_types=[".docx", ".txt", ".md"],
                          splitter_params={"chunk_size": 750, "chunk_overlap": 150, "keep_separator": False})
    return mng


def read(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_reference_example_train_data(llm: Text2TextLLM, llm_server: ScriptedServer, document_dir: Path,
                                      reranker: LocalReranker, tmp_path: Path) -> None:
    dataset_path = tmp_path / "data_output"
    dataset_path.mkdir()
    train_data_generator = TrainDataGenerator(llm, str(dataset_path), reranker)
    split_doc_list = train_data_generator.generate_origin_document(document_path=str(document_dir),
                                                                   loader_mng=loader_mng())
    assert sorted(split_doc_list) == sorted(DOCS.values())
    config = DataProcessConfig()
    train_data_generator.generate_train_data(split_doc_list, config)
    rows = read(dataset_path / "train_data.jsonl")
    generated = read(dataset_path / "generated_qd.jsonl")
    assert len(generated) == 3 * len(DOCS)  # question_number=3 per passage
    # featured keeps ceil(0.8 * 18) = 15; the scripted judge passes them all (two keywords each);
    # two rewrites each are added: 15 * 3 rows
    assert len(rows) == 45
    assert {row["corpus"] for row in rows} <= set(DOCS.values())
    assert sum(", version " in row["query"] for row in rows) == 30
    calls = len(llm_server.requests)
    train_data_generator.generate_train_data(split_doc_list, config)  # done already: nothing asked
    assert len(llm_server.requests) == calls


def test_steps_can_be_switched_off_and_scores_filter(llm: Text2TextLLM, reranker: LocalReranker,
                                                     tmp_path: Path) -> None:
    docs = list(DOCS.values())
    for name, threshold, expected in (("kept", 0.9, 2 * len(docs)), ("dropped", 0.96, 0)):
        out = tmp_path / name
        out.mkdir()
        config = DataProcessConfig(question_number=2, featured=False, llm_threshold_score=threshold, rewrite=False)
        TrainDataGenerator(llm, str(out), reranker).generate_train_data(docs, config, batch_size=3)
        rows = (out / "train_data.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(rows) == expected  # the scripted judge answers 0.95 for these questions


def test_encryption_round_trip(llm: Text2TextLLM, reranker: LocalReranker, tmp_path: Path) -> None:
    def enc(text: str) -> str:
        return text[::-1]

    gen = TrainDataGenerator(llm, str(tmp_path), reranker, encrypt_fn=enc,
                             decrypt_fn=enc)
    gen.generate_train_data(list(DOCS.values())[:2], DataProcessConfig(question_number=1, rewrite=False))
    rows = read(tmp_path / "train_data.jsonl")
    assert rows and all(row["corpus"][::-1] in DOCS.values() for row in rows)
    from mx_rag.tools.finetune.trainer import read_pairs

    assert all(doc in DOCS.values() for _, doc in read_pairs(tmp_path / "train_data.jsonl", enc))


def test_reference_example_eval_data(llm: Text2TextLLM, document_dir: Path, tmp_path: Path) -> None:
    eval_data_generator = EvalDataGenerator(llm, str(tmp_path))
    split_doc_list = eval_data_generator.generate_origin_document(document_path=str(document_dir),
                                                                  loader_mng=loader_mng(),
                                                                  filter_func=lambda texts: texts[:4])
    eval_data_generator.generate_evaluate_data(split_doc_list)
    rows = read(tmp_path / "evaluate_data.jsonl")
    assert len(rows) == 12 and all(row["query"].startswith("What about") for row in rows)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"question_number": 0}, "question_number"),
        ({"question_number": 21}, "question_number"),
        ({"featured_percentage": 1.0}, r"featured_percentage must be a number in \(0.0, 1.0\)"),
        ({"llm_threshold_score": 0}, "llm_threshold_score"),
        ({"featured": 1}, "featured must be a bool"),
        ({"query_rewrite_number": 21}, "query_rewrite_number"),
        ({"generate_qd_prompt": "no placeholders"}, r"must contain the placeholder \{question_number\}"),
        ({"llm_preferred_prompt": ""}, "llm_preferred_prompt"),
    ],
)
def test_config_checks(kwargs: dict, message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        DataProcessConfig(**kwargs)


def test_generator_checks(llm: Text2TextLLM, reranker: LocalReranker, tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="dataset_path"):
        TrainDataGenerator(llm, str(tmp_path / "missing"), reranker)
    with pytest.raises(ParameterError, match="reranker must be a Reranker"):
        TrainDataGenerator(llm, str(tmp_path), "bge")  # type: ignore[arg-type]
    gen = TrainDataGenerator(llm, str(tmp_path), reranker)
    with pytest.raises(ParameterError, match="split_doc_list"):
        gen.generate_train_data([], DataProcessConfig())
    with pytest.raises(ParameterError, match="batch_size"):
        gen.generate_train_data(["x"], DataProcessConfig(), batch_size=0)
    with pytest.raises(ParameterError, match="loader_mng must be a LoaderMng"):
        gen.generate_origin_document(str(tmp_path), loader_mng=None)
