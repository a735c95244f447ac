# SPDX-License-Identifier: Apache-2.0
"""Session fixtures: the real embedded models (loaded once), a tiny CLIP, a scripted TEI server.

``MXRAG_HOME`` points at a session directory, so multilingual-e5-small is converted there once
(about 3 s) and the user's own cache is never touched.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from embedding_helpers import ScriptedTEI, build_tiny_clip

from mx_rag.embedding.local import ImageEmbedding, TextEmbedding
from mx_rag.embedding.local.model_info import minilm_dir
from mx_rag.testing import ScriptedServer


@pytest.fixture(scope="session")
def mxrag_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("mxrag_home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MXRAG_HOME", str(home))
        yield home


@pytest.fixture(scope="session")
def minilm() -> TextEmbedding:
    return TextEmbedding("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def e5(mxrag_home: Path) -> TextEmbedding:
    model = TextEmbedding("multilingual-e5-small", int8=False)  # the converted float32 model itself
    model.embed_query("warm up")  # convert and load once for the session
    return model


@pytest.fixture(scope="session")
def clip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_clip(tmp_path_factory.mktemp("clip"), minilm_dir())


@pytest.fixture(scope="session")
def chinese_clip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_clip(tmp_path_factory.mktemp("chinese_clip"), minilm_dir(), chinese=True)


@pytest.fixture(scope="session")
def clip(clip_dir: Path) -> ImageEmbedding:
    return ImageEmbedding("ViT-B-16", clip_dir)


@pytest.fixture(scope="session")
def tei_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture(scope="session")
def scripted_tei(tei_server: ScriptedServer) -> Iterator[ScriptedTEI]:
    tei = ScriptedTEI(tei_server)
    yield tei
    tei.tei.close()
