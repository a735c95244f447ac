"""The exact-match cache: eviction, limits, files, other processes, chains of caches, LangChain."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.language_models.fake import FakeListLLM

from mx_rag.cache import CacheConfig, EvictPolicy, MxRAGCache
from mx_rag.errors import ParameterError


def memory(folder: Path, name: str = "qa", **kwargs: object) -> MxRAGCache:
    options: dict[str, object] = {"cache_size": 100, "data_save_folder": str(folder), **kwargs}
    return MxRAGCache(name, CacheConfig(**options))  # type: ignore[arg-type]


def test_update_then_search(tmp_path: Path) -> None:
    cache = memory(tmp_path)
    qa = json.dumps({"小明的爸爸是谁?": "小明的爸爸名字是大明"}, ensure_ascii=False)
    cache.update("小明的爸爸是谁?", qa)
    assert cache.search("小明的爸爸是谁?") == qa
    assert cache.search("小明的妈妈是谁?") is None
    assert len(cache) == 1


@pytest.mark.parametrize(
    ("policy", "kept"),
    [
        (EvictPolicy.LRU, {"a", "c", "d"}),  # "b" was used least recently ("a" was read)
        (EvictPolicy.LFU, {"a", "c", "d"}),  # "b" was never read
        (EvictPolicy.FIFO, {"b", "c", "d"}),  # "a" came first
    ],
)
def test_eviction_policies(tmp_path: Path, policy: EvictPolicy, kept: set[str]) -> None:
    cache = memory(tmp_path, cache_size=3, auto_flush=3, eviction_policy=policy)
    for key in "abc":
        cache.update(key, key.upper())
    assert cache.search("a") == "A"
    cache.update("d", "D")
    assert {key for key in "abcd" if cache.search(key)} == kept


def test_random_eviction_keeps_the_size(tmp_path: Path) -> None:
    cache = memory(tmp_path, cache_size=5, auto_flush=5, eviction_policy=EvictPolicy.RR)
    for i in range(20):
        cache.update(f"q{i}", f"a{i}")
    assert len(cache) == 5 and cache.search("q19") in ("a19", None)


def test_auto_flush_and_a_new_instance_finds_the_answers(tmp_path: Path) -> None:
    cache = memory(tmp_path, auto_flush=2)
    cache.update("q1", "a1")
    assert not (tmp_path / "qa.json").exists()
    cache.update("q2", "a2")
    assert (tmp_path / "qa.json").exists()
    cache.update("q3", "a3")
    cache.flush()
    again = memory(tmp_path)
    assert [again.search(f"q{i}") for i in (1, 2, 3)] == ["a1", "a2", "a3"]
    again.clear()
    assert not (tmp_path / "qa.json").exists() and memory(tmp_path).search("q1") is None


def test_cache_limit_and_verbose(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = memory(tmp_path)
    try:
        MxRAGCache.set_cache_limit(10)
        cache.update("long", "x" * 11)
        cache.update("short", "x" * 10)
        assert cache.search("long") is None and cache.search("short") == "x" * 10
        MxRAGCache.set_verbose(True)
        with caplog.at_level("INFO", logger="mx_rag.cache.mxrag_cache"):
            cache.search("short")
            cache.search("unknown")
        assert "cache qa: hit" in caplog.text and "cache qa: miss" in caplog.text
    finally:
        MxRAGCache.set_cache_limit(1_000_000)
        MxRAGCache.set_verbose(False)
    with pytest.raises(ParameterError, match=r"cache_limit must be in \[1, 1000000\]"):
        MxRAGCache.set_cache_limit(0)


WRITER = textwrap.dedent("""
    import sys
    from mx_rag.cache import CacheConfig, MxRAGCache
    folder, tag = sys.argv[1], sys.argv[2]
    cache = MxRAGCache("shared", CacheConfig(cache_size=1000, auto_flush=7, data_save_folder=folder))
    for i in range(30):
        cache.update(f"{tag}-q{i}", f"{tag}-a{i}")
    cache.flush()
""")


def test_processes_sharing_a_folder_keep_every_answer(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), tag]) for tag in ("p1", "p2", "p3")]
    assert [proc.wait(timeout=120) for proc in procs] == [0, 0, 0]
    reader = MxRAGCache("shared", CacheConfig(cache_size=1000, data_save_folder=str(tmp_path)))
    assert len(reader) == 90
    assert reader.search("p2-q29") == "p2-a29"


def test_an_answer_flushed_by_another_process_is_found_on_a_miss(tmp_path: Path) -> None:
    reader = memory(tmp_path, name="shared")
    assert reader.search("p9-q3") is None
    subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), "p9"], check=True, timeout=120)
    assert reader.search("p9-q3") == "p9-a3"


def test_join_cascades_and_promotes_hits(tmp_path: Path) -> None:
    l1 = memory(tmp_path, name="l1")
    l2 = memory(tmp_path, name="l2")
    l1.join(l2)
    l2.update("only below", "deep")
    assert l1.search("only below") == "deep" and len(l1) == 1  # copied up
    l1.update("both", "yes")
    assert l2.search("both") == "yes"
    with pytest.raises(ParameterError, match="cannot join itself"):
        l1.join(l1)
    with pytest.raises(ParameterError, match="no cycles"):
        l2.join(l1)
    chain = [memory(tmp_path, name=f"c{i}") for i in range(7)]
    for i in range(4):
        chain[i].join(chain[i + 1])
    chain[0].join(chain[5])  # 6 in all
    with pytest.raises(ParameterError, match="at most 6"):
        chain[0].join(chain[6])


def test_get_obj_is_a_langchain_cache(tmp_path: Path) -> None:
    cache = memory(tmp_path)
    llm = FakeListLLM(responses=["first", "second"], cache=cache.get_obj())
    assert llm.invoke("What is FAISS?") == "first"
    assert llm.invoke("What is FAISS?") == "first"  # from the cache: the fake would say "second"
    assert json.loads(cache.search("What is FAISS?") or "")["generations"] == ["first"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cache_size": 0}, r"cache_size must be in \[1, 100000\]"),
        ({"cache_size": 10, "auto_flush": 11}, r"auto_flush must be in \[1, 10\]"),
        ({"cache_size": 10, "eviction_policy": "LRU"}, "eviction_policy must be an EvictPolicy"),
        ({"cache_size": 10, "min_free_space": 1024}, r"min_free_space must be in \[20971520, 107374182400\]"),
        ({"cache_size": 10, "similarity_threshold": 1.5}, r"similarity_threshold must be in \[0.0, 1.0\]"),
        ({"cache_size": 10, "data_save_folder": "relative/dir"}, "data_save_folder must be an absolute path"),
        ({"cache_size": 10, "lock": "lock"}, "lock must be None, a threading.Lock"),
    ],
)
def test_config_errors_name_the_parameter(kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ParameterError, match=message):
        CacheConfig(**kwargs)


def test_cache_name_and_arguments(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="cache_name must be a str matching"):
        memory(tmp_path, name="bad-name")
    cache = memory(tmp_path)
    with pytest.raises(ParameterError, match="query must have length"):
        cache.search("")
    with pytest.raises(ParameterError, match="answer must be a non-empty str"):
        cache.update("q", "")
