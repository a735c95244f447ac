# SPDX-License-Identifier: Apache-2.0
"""The embedder conformance suite: every embedder passes the same checks.

Embedders: all-MiniLM-L6-v2 and multilingual-e5-small (TextEmbedding), TEIEmbedding over the
scripted server (vectors from a deterministic function of the text), and the text side of
ImageEmbedding (a tiny random CLIP).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pytest

from mx_rag.errors import ParameterError

TEXTS = [
    "How many people live in Berlin?",
    "Berlin has a population of 3.7 million.",
    "北京是中华人民共和国的首都。",
    "a",
    "Émile Zola wrote Germinal 📚 in 1885",
    "   spaced    out   text   ",
    "Demon Dice, originally published as Chaos Progenitus, is a collectible dice game created by Lester "
    "Smith (designer of the better-known Dragon Dice) and Tim Brown, in which each player controls a demon.",
    "The quick brown fox jumps over the lazy dog.",
]


@dataclass
class Case:
    embedder: Any
    dimension: int
    max_text_len: int


CASES = {
    "minilm": lambda r: Case(r.getfixturevalue("minilm"), 384, 128 * 1024 * 1024),
    "e5": lambda r: Case(r.getfixturevalue("e5"), 384, 128 * 1024 * 1024),
    "tei": lambda r: Case(r.getfixturevalue("scripted_tei"), 16, 128 * 1024 * 1024),
    "clip_text": lambda r: Case(r.getfixturevalue("clip"), 32, 256),
}


@pytest.fixture(params=list(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    return CASES[request.param](request)


_REFERENCE: dict[int, list[list[float]]] = {}


def reference(case: Case) -> list[list[float]]:
    """``embed_documents(TEXTS)`` with the default batch size, computed once per embedder."""
    key = id(case.embedder)
    if key not in _REFERENCE:
        _REFERENCE[key] = case.embedder.embed_documents(TEXTS)
    return _REFERENCE[key]


def _max_diff(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for u, v in zip(a, b, strict=True) for x, y in zip(u, v, strict=True))


def test_one_vector_per_text_of_fixed_dimension(case: Case) -> None:
    vectors = reference(case)
    assert len(vectors) == len(TEXTS)
    assert all(len(v) == case.dimension and all(isinstance(x, float) for x in v) for v in vectors)
    if hasattr(case.embedder, "dimension"):
        assert case.embedder.dimension == case.dimension


def test_vectors_have_unit_norm(case: Case) -> None:
    vectors = [*reference(case), case.embedder.embed_query(TEXTS[0])]
    for vector in vectors:
        assert math.sqrt(sum(x * x for x in vector)) == pytest.approx(1.0, abs=1e-5)


def test_deterministic(case: Case) -> None:
    assert _max_diff(case.embedder.embed_documents(TEXTS), reference(case)) < 1e-6
    assert case.embedder.embed_query(TEXTS[2]) == pytest.approx(case.embedder.embed_query(TEXTS[2]), abs=1e-6)


@pytest.mark.parametrize("batch_size", [1, 3, 1024])
def test_batch_size_invariant(case: Case, batch_size: int) -> None:
    assert _max_diff(case.embedder.embed_documents(TEXTS, batch_size=batch_size), reference(case)) < 1e-5


def test_order_kept(case: Case) -> None:
    forward = reference(case)
    permutation = [5, 0, 7, 2, 6, 1, 4, 3]
    shuffled = case.embedder.embed_documents([TEXTS[i] for i in permutation], batch_size=3)
    assert _max_diff(shuffled, [forward[i] for i in permutation]) < 1e-5


def test_query_vector(case: Case) -> None:
    query = case.embedder.embed_query("Which city is the capital of Germany?")
    assert len(query) == case.dimension


BAD_TEXTS = [
    pytest.param(lambda n: "just a string", "texts", id="not-a-list"),
    pytest.param(lambda n: [], "texts", id="empty-list"),
    pytest.param(lambda n: ["ok", ""], "texts[1]", id="empty-text"),
    pytest.param(lambda n: ["ok", 3], "texts[1]", id="not-a-str"),
    pytest.param(lambda n: ["x" * (n + 1)], "texts[0]", id="text-too-long"),
    pytest.param(lambda n: ["a"] * 1_000_001, "texts", id="too-many-texts"),
]


@pytest.mark.parametrize(("make", "name"), BAD_TEXTS)
def test_texts_limits(case: Case, make: Any, name: str) -> None:
    with pytest.raises(ParameterError, match=rf"^{re.escape(name)} "):
        case.embedder.embed_documents(make(case.max_text_len))
    if hasattr(case.embedder, "requests_sent"):
        assert case.embedder.requests_sent == 0


@pytest.mark.parametrize("batch_size", [0, 1025, True, "2", 2.0])
def test_batch_size_limits(case: Case, batch_size: Any) -> None:
    with pytest.raises(ParameterError, match=r"^batch_size "):
        case.embedder.embed_documents(["ok"], batch_size=batch_size)


@pytest.mark.parametrize("make", [lambda n: "", lambda n: None, lambda n: ["list"], lambda n: "x" * (n + 1)])
def test_query_limits(case: Case, make: Any) -> None:
    with pytest.raises(ParameterError, match=r"^text "):
        case.embedder.embed_query(make(case.max_text_len))


def test_errors_are_value_errors(case: Case) -> None:
    with pytest.raises(ValueError, match="texts"):
        case.embedder.embed_documents([])
