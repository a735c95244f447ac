# SPDX-License-Identifier: Apache-2.0
"""Importing and constructing embedders is cheap: no torch, transformers or sentence-transformers."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "sentence_transformers", "tokenizers", "safetensors")


def loaded_after(code: str) -> set[str]:
    script = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)
    return set(result.stdout.split())


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_import_and_construct_without_torch() -> None:
    modules = loaded_after(
        "import mx_rag.embedding, mx_rag.embedding.local, mx_rag.embedding.service\n"
        "from mx_rag.embedding.local import TextEmbedding, ImageEmbedding\n"
        "from mx_rag.embedding import TEIEmbedding, CLIPEmbedding, SparseEmbedding, EmbeddingFactory\n"
        "emb = TextEmbedding()\n"
        "assert emb.dimension == 384\n"
        "TextEmbedding('multilingual-e5-small')\n"
    )
    assert heavy(modules) == []


def test_import_local_package_alone_is_light() -> None:
    modules = loaded_after("import mx_rag.embedding.local")
    assert heavy(modules) == [] and "httpx" not in modules


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("mx_rag.embedding", ["CLIPEmbedding", "EmbeddingFactory", "ImageEmbedding", "SparseEmbedding",
                              "TEIEmbedding", "TextEmbedding"]),
        ("mx_rag.embedding.local", ["ImageEmbedding", "SparseEmbedding", "TextEmbedding"]),
        ("mx_rag.embedding.service", ["CLIPEmbedding", "TEIEmbedding"]),
    ],
)
def test_public_names(module: str, names: list[str]) -> None:
    import importlib

    package = importlib.import_module(module)
    assert package.__all__ == names
    for name in names:
        assert getattr(package, name).__name__ == name
    with pytest.raises(AttributeError):
        package.NoSuchEmbedding  # noqa: B018


def test_embedders_are_langchain_embeddings() -> None:
    from langchain_core.embeddings import Embeddings

    from mx_rag.embedding import ImageEmbedding, TEIEmbedding, TextEmbedding

    assert all(issubclass(cls, Embeddings) for cls in (ImageEmbedding, TEIEmbedding, TextEmbedding))
