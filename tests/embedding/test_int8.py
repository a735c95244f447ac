# SPDX-License-Identifier: Apache-2.0
"""The int8 CPU path: vectors close to float32 on real text, one default model, variants never mixed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mx_rag.embedding.local import TextEmbedding
from mx_rag.embedding.local.int8 import INT8_FILE, int8_available, int8_dir
from mx_rag.embedding.local.text_embedding import DEFAULT_MODEL, INT8_DEFAULT_MODELS, INT8_SUFFIX
from mx_rag.errors import KnowledgeError, ParameterError
from mx_rag.knowledge.local import LocalKnowledge
from mx_rag.knowledge.store import DEFAULT_EMBEDDING, choose_embedding, recorded_int8
from mx_rag.utils.model_cache import MARKER_FILE

pytestmark = pytest.mark.skipif(not int8_available(), reason='the int8 extra: pip install "mxrag[int8]"')

DATA = Path(__file__).parents[1] / "data"
# The lowest cosine between int8 and float32 vectors accepted on real text. Measured: all-MiniLM-L6-v2
# on the chunks of real_chunks(), median 0.991, minimum 0.975 (docs/benchmarks.md, "int8 embedding",
# has multilingual-e5-small's 0.996 / 0.99 on HotpotQA and MuSiQue); torch's dynamic int8 gave 0.957.
COSINE_BOUND = 0.96


def real_chunks() -> list[str]:
    """The Debian Reference paragraphs (English and Chinese) and a Markdown file with code, in 600-character chunks."""
    lines = (DATA / "storage" / "debian_reference_excerpt.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [f"{r['title']}: {r['text']}" for r in map(json.loads, lines)]
    code = (DATA / "docs" / "codeblock.md").read_text(encoding="utf-8")
    return texts + [code[i:i + 600] for i in range(0, len(code), 600) if code[i:i + 600].strip()]


@pytest.mark.slow
def test_int8_vectors_stay_close_to_float32(minilm: TextEmbedding, mxrag_home: Path) -> None:
    int8 = TextEmbedding("all-MiniLM-L6-v2", int8=True)
    assert int8.embedding_id == "all-minilm-l6-v2" + INT8_SUFFIX and minilm.embedding_id == "all-minilm-l6-v2"
    texts = real_chunks()
    cosine = (np.asarray(int8.embed_documents(texts)) * np.asarray(minilm.embed_documents(texts))).sum(axis=1)
    assert cosine.min() >= COSINE_BOUND, (float(np.median(cosine)), float(cosine.min()))
    query = np.asarray(int8.embed_query("How do I configure the network?"))
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-4
    # built once, atomically, into the models cache; a second encoder reuses the file
    cached = int8_dir(int8.model_dir) / INT8_FILE
    assert cached.is_file() and (cached.parent / MARKER_FILE).is_file()
    assert str(cached).startswith(str(mxrag_home)) and not list(cached.parent.parent.glob(".*.tmp-*"))
    before = cached.stat().st_mtime_ns
    TextEmbedding("all-MiniLM-L6-v2", int8=True).embed_documents(texts[:2])
    assert cached.stat().st_mtime_ns == before


def test_one_default_model_for_the_sdk_and_local_knowledge(tmp_path: Path, mxrag_home: Path) -> None:
    assert DEFAULT_MODEL == DEFAULT_EMBEDDING == "multilingual-e5-small"
    default = TextEmbedding()
    kb = LocalKnowledge.open(tmp_path / "kb", white_paths=[tmp_path])
    assert kb.embedding.embedding_id == default.embedding_id
    # on a CPU with the int8 extra installed, int8 exactly when the default model qualified for it
    int8 = DEFAULT_MODEL in INT8_DEFAULT_MODELS
    assert default.int8 is int8 and default.embedding_id == "multilingual-e5-small" + (INT8_SUFFIX if int8 else "")


def test_a_knowledge_base_keeps_its_variant(tmp_path: Path) -> None:
    """Built in int8, opened in float32: a clear error; opened without saying: int8 again."""
    root = tmp_path / "kb"
    built = LocalKnowledge.open(root, white_paths=[tmp_path], embedding_model="all-MiniLM-L6-v2", int8=True)
    assert built.embedding.int8
    with pytest.raises(KnowledgeError, match=r"holds int8 vectors of 'all-minilm-l6-v2@int8'.*int8=True"):
        LocalKnowledge.open(root, white_paths=[tmp_path], embedding_model="all-MiniLM-L6-v2", int8=False)
    again = LocalKnowledge.open(root, white_paths=[tmp_path])  # the folder's model and variant
    assert again.embedding.embedding_id == "all-minilm-l6-v2" + INT8_SUFFIX


def test_a_float_knowledge_base_refuses_int8(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    LocalKnowledge.open(root, white_paths=[tmp_path], embedding_model="all-MiniLM-L6-v2", int8=False)
    with pytest.raises(KnowledgeError, match=r"holds float vectors of 'all-minilm-l6-v2'.*int8=False"):
        LocalKnowledge.open(root, white_paths=[tmp_path], embedding_model="all-MiniLM-L6-v2", int8=True)
    assert not LocalKnowledge.open(root, white_paths=[tmp_path], embedding_model="all-MiniLM-L6-v2").embedding.int8


def test_recorded_variant() -> None:
    recorded = ["all-minilm-l6-v2@int8", "multilingual-e5-small"]
    assert recorded_int8("all-MiniLM-L6-v2", recorded) is True
    assert recorded_int8("multilingual-e5-small", recorded) is False  # built before int8: stays float32
    assert recorded_int8("/models/bge-small", recorded) is None
    assert choose_embedding(None, recorded) == "all-MiniLM-L6-v2"  # the model, whatever its variant


def test_int8_argument_is_checked() -> None:
    with pytest.raises(ParameterError, match=r"^int8\b"):
        TextEmbedding("all-MiniLM-L6-v2", int8="yes")  # type: ignore[arg-type]
