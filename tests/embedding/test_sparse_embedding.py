"""SparseEmbedding on a tiny BERT built at test time with a BGE-M3-style sparse head
(``sparse_linear.pt`` or ``.safetensors``): real tokenizer, real forward passes."""

from pathlib import Path

import pytest

from mx_rag.embedding.local import SparseEmbedding
from mx_rag.embedding.local.model_info import minilm_dir
from mx_rag.errors import ParameterError


def build(out: Path, *, bias: float | None = None, head: str = "pt", seed: int = 0) -> Path:
    """A 2-layer BERT (MiniLM's tokenizer) plus a Linear(hidden, 1) head; ``bias`` set: zero weights."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(minilm_dir())).save_pretrained(str(out))
    linear = torch.nn.Linear(32, 1)
    if bias is not None:
        torch.nn.init.zeros_(linear.weight)
        torch.nn.init.constant_(linear.bias, bias)
    if head == "pt":
        torch.save(linear.state_dict(), out / "sparse_linear.pt")
    else:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in linear.state_dict().items()}, str(out / "sparse_linear.safetensors"))
    return out


@pytest.fixture(scope="module")
def random_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("bge-m3-tiny"))


@pytest.fixture(scope="module")
def constant_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("bge-m3-const"), bias=0.75, head="safetensors")


def test_constant_head_weighs_every_word_token(constant_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(constant_dir))
    embed = SparseEmbedding(str(constant_dir), dev_id=0)
    text = "the cat sat on the mat"
    vector = embed.embed_query(text)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert vector == pytest.approx({i: 0.75 for i in ids})
    assert tokenizer.cls_token_id not in vector and tokenizer.sep_token_id not in vector


def test_negative_head_gives_empty_dicts(tmp_path: Path) -> None:
    embed = SparseEmbedding.create(model_path=str(build(tmp_path, bias=-1.0)))
    assert embed.embed_documents(["abc", "bcd"]) == [{}, {}]


def test_reference_example_and_shapes(random_dir: Path) -> None:
    embed = SparseEmbedding.create(model_path=str(random_dir), dev_id=1)  # no accelerator: the CPU
    docs = embed.embed_documents(["abc", "bcd"])
    assert len(docs) == 2 and all(isinstance(d, dict) for d in docs)
    assert all(isinstance(k, int) and isinstance(v, float) and v > 0 for d in docs for k, v in d.items())
    assert embed.embed_query("abc") == pytest.approx(docs[0], rel=1e-4)


def test_batching_and_padding_do_not_change_weights(random_dir: Path) -> None:
    embed = SparseEmbedding(str(random_dir))
    texts = ["short", "a much longer text with many more words in it than the first", "中文 文本 测试"] * 3
    one_by_one = [embed.embed_query(t) for t in texts]
    batched = embed.embed_documents(texts, batch_size=4)
    for a, b in zip(one_by_one, batched, strict=True):
        assert a.keys() == b.keys() and all(a[k] == pytest.approx(b[k], rel=1e-4, abs=1e-6) for k in a)


def test_repeated_token_keeps_its_largest_weight(random_dir: Path) -> None:
    embed = SparseEmbedding(str(random_dir))
    loaded = embed._model()
    import torch

    encoded = loaded.tokenizer(["dog dog dog cat"], return_tensors="pt")
    with torch.inference_mode():
        weights = torch.relu(loaded.head(loaded.model(**encoded).last_hidden_state)).squeeze(-1)[0].tolist()
    dog = loaded.tokenizer.convert_tokens_to_ids("dog")
    positions = [i for i, t in enumerate(encoded["input_ids"][0].tolist()) if t == dog]
    expected = max(weights[i] for i in positions)
    assert embed.embed_query("dog dog dog cat").get(dog, 0.0) == pytest.approx(expected, rel=1e-4)


def test_errors(tmp_path: Path, random_dir: Path) -> None:
    with pytest.raises(ParameterError, match="has no sparse head"):
        SparseEmbedding(str(minilm_dir()))
    with pytest.raises(ParameterError, match="model_path"):
        SparseEmbedding(str(tmp_path / "missing"))
    with pytest.raises(ParameterError, match="dev_id"):
        SparseEmbedding(str(random_dir), dev_id=64)
    embed = SparseEmbedding(str(random_dir))
    with pytest.raises(ParameterError, match="batch_size"):
        embed.embed_documents(["a"], batch_size=0)
    with pytest.raises(ParameterError, match="texts"):
        embed.embed_documents([])
    with pytest.raises(ParameterError, match="text"):
        embed.embed_query("")


def test_wrong_head_shape_is_named(tmp_path: Path) -> None:
    import torch

    out = build(tmp_path)
    torch.save(torch.nn.Linear(16, 1).state_dict(), out / "sparse_linear.pt")
    with pytest.raises(ParameterError, match="is not a Linear\\(32, 1\\) head"):
        SparseEmbedding(str(out)).embed_query("abc")

