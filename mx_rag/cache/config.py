# SPDX-License-Identifier: Apache-2.0
"""``EvictPolicy``, ``CacheConfig`` (exact-match cache) and ``SimilarityCacheConfig`` (semantic cache).

Both are checked on construction; every message names the parameter, the value and the range.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Any

from mx_rag.utils.checks import check_bool, check_int, check_number, fail
from mx_rag.utils.common import GB, MB
from mx_rag.utils.file_check import check_path

__all__ = ["CacheConfig", "EvictPolicy", "SimilarityCacheConfig", "default_cache_folder"]

MAX_CACHE_SIZE = 100_000
MAX_TOP_K = 1000
MIN_FREE_SPACE = 20 * MB
MAX_FREE_SPACE = 100 * GB
MAX_DICT_ITEMS = 1024
MAX_DICT_STR = 1024


class EvictPolicy(Enum):
    """Which entry goes when a cache is full."""

    LRU = "LRU"  # the least recently used
    LFU = "LFU"  # the least frequently used
    FIFO = "FIFO"  # the oldest
    RR = "RR"  # a random one


def default_cache_folder() -> Path:
    """``$MXRAG_HOME/cache``, by default ``~/.cache/mx_rag/cache``."""
    root = os.environ.get("MXRAG_HOME") or os.path.join("~", ".cache", "mx_rag")
    return Path(root).expanduser() / "cache"


def _check_lock(lock: Any) -> Any:
    if lock is not None and not (callable(getattr(lock, "acquire", None)) and callable(getattr(lock, "release", None))):
        raise fail("lock", lock, "None, a threading.Lock or a multiprocessing.Lock")
    return lock


def _check_folder(value: Any) -> Path:
    if value is None:
        return default_cache_folder()
    path = check_path("data_save_folder", value)
    if not Path(os.fspath(value)).expanduser().is_absolute():
        raise fail("data_save_folder", value, "an absolute path")
    if Path(os.fspath(value)).expanduser().is_symlink():
        raise fail("data_save_folder", value, "a path that is not a symbolic link")
    return path


class CacheConfig:
    """Settings of an exact-match (memory) cache.

    Args:
        cache_size: entries kept, in [1, 100000].
        eviction_policy: ``EvictPolicy`` used when the cache is full. Default LRU.
        auto_flush: write the cache to disk after this many updates, in [1, cache_size]. Default 20
            (``cache_size`` when smaller).
        data_save_folder: an absolute folder for the cache files; created when first written.
            Default ``$MXRAG_HOME/cache`` (``~/.cache/mx_rag/cache``).
        min_free_space: bytes that must stay free on that disk, in [20 MiB, 100 GiB]. Default 1 GiB.
        similarity_threshold: in [0.0, 1.0]; a similarity cache's hit needs at least this
            similarity. Default 0.8.
        disable_report: accepted for compatibility (no report is sent anywhere). Default False.
        lock: None, or a ``threading.Lock``/``multiprocessing.Lock`` taken around each change
            (caches are thread- and process-safe without one).

    Example:
        >>> from mx_rag.cache import CacheConfig, EvictPolicy
        >>> config = CacheConfig(cache_size=100, eviction_policy=EvictPolicy.LFU, auto_flush=10)
    """

    def __init__(
        self,
        cache_size: int,
        eviction_policy: EvictPolicy = EvictPolicy.LRU,
        auto_flush: int | None = None,
        data_save_folder: str | os.PathLike[str] | None = None,
        min_free_space: int = GB,
        similarity_threshold: float = 0.8,
        disable_report: bool = False,
        lock: Any = None,
    ) -> None:
        self.cache_size = check_int("cache_size", cache_size, 1, MAX_CACHE_SIZE)
        if not isinstance(eviction_policy, EvictPolicy):
            raise fail("eviction_policy", eviction_policy, f"an EvictPolicy ({[p.name for p in EvictPolicy]})")
        self.eviction_policy = eviction_policy
        self.auto_flush = check_int("auto_flush", min(20, self.cache_size) if auto_flush is None else auto_flush, 1,
                                    self.cache_size)
        self.data_save_folder = _check_folder(data_save_folder)
        self.min_free_space = check_int("min_free_space", min_free_space, MIN_FREE_SPACE, MAX_FREE_SPACE)
        self.similarity_threshold = check_number("similarity_threshold", similarity_threshold, 0.0, 1.0)
        self.disable_report = check_bool("disable_report", disable_report)
        self.lock = _check_lock(lock)


def check_config_dict(name: str, value: Any, max_depth: int, depth: int = 1) -> dict[str, Any]:
    """A dict of at most 1024 entries, strings of at most 1024 characters, nested at most ``max_depth``."""
    if not isinstance(value, dict):
        raise fail(name, value, "a dict")
    if len(value) > MAX_DICT_ITEMS:
        raise fail(name, f"<{len(value)} entries>", f"a dict of at most {MAX_DICT_ITEMS} entries")
    for key, item in value.items():
        if not isinstance(key, str) or not 0 < len(key) <= MAX_DICT_STR:
            raise fail(f"{name} key", key, f"a str of 1 to {MAX_DICT_STR} characters")
        if isinstance(item, str) and len(item) > MAX_DICT_STR:
            raise fail(f"{name}[{key!r}]", item, f"a str of at most {MAX_DICT_STR} characters")
        if isinstance(item, dict):
            if depth >= max_depth:
                raise fail(f"{name}[{key!r}]", item, f"no dict (nesting deeper than {max_depth})")
            check_config_dict(f"{name}[{key!r}]", item, max_depth, depth + 1)
        elif isinstance(item, (list, tuple)) and len(item) > MAX_DICT_ITEMS:
            raise fail(f"{name}[{key!r}]", f"<{len(item)} items>", f"at most {MAX_DICT_ITEMS} items")
    return dict(value)


def _score_range(config: dict[str, Any]) -> tuple[float, float, bool]:
    low = check_number("similarity_config['score_min']", config.pop("score_min", 0.0), 0.0, 100.0)
    high = check_number("similarity_config['score_max']", config.pop("score_max", 1.0), 1.0, 100.0)
    if high < low:
        raise fail("similarity_config['score_max']", high, f"at least score_min ({low})")
    return low, high, check_bool("similarity_config['reverse']", config.pop("reverse", False))


class SimilarityCacheConfig(CacheConfig):
    """Settings of a semantic cache: questions embedded, searched in a vector store, compared by a reranker.

    Args:
        vector_config: the vector store: ``{"vector_type": "npu_faiss_db", "x_dim": 384}`` (a
            FAISS file in ``data_save_folder``, or at ``"vector_save_file"``), or
            ``{"vector_type": "milvus_db", "client": MilvusClient(...), "collection_name": ..., "x_dim": ...}``;
            other keys go to the store (``VectorStorageFactory.create_storage``). ``x_dim``
            missing or 0: taken from the embedding.
        cache_config: ``"sqlite"`` (questions and answers in ``<data_save_folder>/<name>.db``).
        emb_config: ``{"embedding_type": "local_text_embedding" | "tei_embedding", ...}`` (the
            embedder's arguments), or ``{"embedding": <an Embeddings object>}`` to share a loaded model.
        similarity_config: ``{"similarity_type": "local_reranker" | "tei_reranker", ...}``, or
            ``{"reranker": <a Reranker>}``, with ``score_min`` (0.0), ``score_max`` (1.0) and
            ``reverse`` (False) mapping its scores onto [0, 1]; None or ``{}`` compares by the
            cosine similarity of the embeddings.
        retrieval_top_k: candidates taken from the vector store, in [1, 1000]. Default 1.
        clean_size: entries evicted at once when the cache is full, in [1, cache_size]. Default 1.
        **kwargs: the ``CacheConfig`` arguments (``cache_size`` is required).

    Example:
        >>> from mx_rag.cache import SimilarityCacheConfig
        >>> config = SimilarityCacheConfig(
        ...     vector_config={"vector_type": "npu_faiss_db", "x_dim": 384}, cache_config="sqlite",
        ...     emb_config={"embedding_type": "local_text_embedding"}, similarity_config={},
        ...     cache_size=1000, similarity_threshold=0.86)
    """

    def __init__(
        self,
        vector_config: dict[str, Any] | None,
        cache_config: str | None,
        emb_config: dict[str, Any],
        similarity_config: dict[str, Any] | None = None,
        retrieval_top_k: int = 1,
        clean_size: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (vector_config is None) != (cache_config is None):
            raise fail("vector_config", vector_config, "None together with cache_config, or both given")
        if cache_config is not None and cache_config != "sqlite":
            raise fail("cache_config", cache_config, "'sqlite'")
        self.vector_config = None if vector_config is None else check_config_dict("vector_config", vector_config, 2)
        self.cache_config = cache_config
        self.emb_config = check_config_dict("emb_config", emb_config, 1)
        self.similarity_config = check_config_dict("similarity_config", similarity_config or {}, 1)
        self.score_min, self.score_max, self.reverse = _score_range(self.similarity_config)
        self.retrieval_top_k = check_int("retrieval_top_k", retrieval_top_k, 1, MAX_TOP_K)
        self.clean_size = check_int("clean_size", clean_size, 1, self.cache_size)

    @property
    def is_similarity(self) -> bool:
        """False when ``vector_config`` and ``cache_config`` are None: then it is a memory cache."""
        return self.vector_config is not None
