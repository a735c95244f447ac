"""``mx_rag.summary``, ``mx_rag.compress``, ``mx_rag.cache`` and ``mx_rag.evaluate``: lazy, sorted, complete."""

import importlib
import subprocess
import sys

import pytest

HEAVY = ("torch", "faiss", "transformers", "sentence_transformers", "pymilvus", "xllamacpp", "sklearn")
PACKAGES = {
    "mx_rag.cache": ["CacheChainChat", "CacheConfig", "EvictPolicy", "MarkDownParser", "MxRAGCache", "QAGenerate",
                     "QAGenerationConfig", "SimilarityCacheConfig"],
    "mx_rag.evaluate": ["RAGEvaluator"],
    "mx_rag.compress": ["ClusterCompressor", "PromptCompressor", "RerankCompressor"],
    "mx_rag.summary": ["Summary"],
}


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_public_name_imports_and_all_is_sorted(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__all__ == sorted(PACKAGES[package])
    for name in module.__all__:
        assert getattr(module, name).__name__ == name


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_importing_the_package_is_light(package: str) -> None:
    code = f"import sys, {package}; print(' '.join(sorted(sys.modules)))"
    modules = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert not [m for m in modules if m.split(".")[0] in HEAVY]
    assert "httpx" not in modules
