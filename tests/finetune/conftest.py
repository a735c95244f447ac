"""Fine-tuning fixtures: documents on disk, a scripted LLM that writes, scores and rewrites questions
from the prompt it gets, a real cross-encoder and a tiny BERT, both built at test time."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mx_rag.llm import Text2TextLLM
from mx_rag.reranker.local import LocalReranker
from mx_rag.testing import RecordedRequest, Reply, ScriptedServer
from mx_rag.utils import ClientParam

DOCS = {
    "volcano.txt": "Volcanoes erupt when magma rises through the crust. Basalt lava flows are hot and fluid.",
    "bread.txt": "Sourdough bread rises with wild yeast. Bakers feed the starter with flour and water.",
    "chess.txt": "In chess the knight moves in an L shape. Castling moves the king two squares.",
    "tides.txt": "Ocean tides follow the moon. Spring tides happen at full and new moon.",
    "bees.txt": "Honey bees dance to show where flowers are. The queen lays the eggs of the hive.",
    "glacier.txt": "Glaciers carve valleys as the ice slides downhill. Moraines mark where they ended.",
}
STOP = {"the", "and", "with", "when", "where", "through", "are", "they", "show", "moves", "happen", "follow"}


def _keywords(doc: str) -> list[str]:
    words = [w.lower() for w in re.findall(r"[A-Za-z]{4,}", doc)]
    return list(dict.fromkeys(w for w in words if w not in STOP))


def llm_answer(request: RecordedRequest) -> Reply | None:
    prompt = request.json["messages"][-1]["content"]
    if "请阅读下面的文章" in prompt or "阅读文章" in prompt:  # generation
        number = int(re.search(r"提出(\d+)个", prompt).group(1))
        doc = prompt.split("文章：")[-1].split("\n")[0]
        words = _keywords(doc)
        return Reply.chat("\n".join(f"问题{i + 1}：What about {words[i]} and {words[i + 1]}?"
                                    for i in range(min(number, len(words) - 1))))
    if "相关性分数" in prompt:  # scoring: high when the question's words are in the document
        query = prompt.split("问题：")[-1].split("\n")[0]
        doc = prompt.split("文档：")[-1].split("\n")[0]
        hits = sum(w in doc.lower() for w in _keywords(query))
        return Reply.chat(f"{0.95 if hits >= 2 else 0.2:.2f}")
    if "改写成" in prompt:  # rewriting
        number = int(re.search(r"改写成(\d+)个", prompt).group(1))
        query = prompt.split("问题：")[-1].strip()
        return Reply.chat("\n".join(f"{i + 1}. {query[:-1]}, version {i + 1}?" for i in range(number)))
    return None


@pytest.fixture(scope="package")
def llm_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(responder=llm_answer) as server:
        yield server


@pytest.fixture
def llm(llm_server: ScriptedServer) -> Text2TextLLM:
    llm_server.reset()
    return Text2TextLLM(base_url=llm_server.url("/v1/chat/completions"), model_name="Llama3-8B-Chinese-Chat",
                        client_param=ClientParam(use_http=True, retries=0))


@pytest.fixture(scope="package")
def document_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("documents")
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    (root / "notes.bin").write_bytes(b"\x00\x01")  # no loader: skipped
    return root


@pytest.fixture(scope="package")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from mx_rag.embedding.local.model_info import minilm_dir

    out = tmp_path_factory.mktemp("cross-encoder")
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_pretrained(str(minilm_dir()), num_labels=1).save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(minilm_dir())).save_pretrained(str(out))
    return out


@pytest.fixture(scope="package")
def reranker(cross_encoder_dir: Path) -> LocalReranker:
    return LocalReranker(str(cross_encoder_dir), dev_id=0)


@pytest.fixture(scope="package")
def tiny_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer BERT with MiniLM's vocabulary (random weights: fine-tuning has much to learn)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from mx_rag.embedding.local.model_info import minilm_dir

    out = tmp_path_factory.mktemp("tiny-encoder")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=128)
    BertModel(config).save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(minilm_dir())).save_pretrained(str(out))
    return out
