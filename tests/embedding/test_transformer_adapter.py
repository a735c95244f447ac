"""The NPU speed-up switches of model_inference_acceleration.md: importable, documented no-ops."""

import logging
import subprocess
import sys

import numpy as np
import pytest

from mx_rag.embedding.local import TextEmbedding
from mx_rag.embedding.local.model_info import minilm_dir

FAMILIES = ("bert", "roberta", "xlm_roberta", "clip")


def test_switches_import_without_torch() -> None:
    code = ("import sys\n" + "".join(f"from mx_rag.transformer_adapter.modeling_{f}_adapter import enable_{f}_speed\n"
                                      for f in FAMILIES)
            + "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reference_example_gives_the_same_vectors(monkeypatch: pytest.MonkeyPatch, minilm: TextEmbedding,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    import importlib

    from mx_rag import transformer_adapter

    plain = minilm.embed_documents(["北京有哪些景点？"])
    monkeypatch.setenv("ENABLE_BOOST", "True")
    assert transformer_adapter.boost_requested()
    transformer_adapter._noted.discard("bert")
    with caplog.at_level(logging.INFO, logger="mx_rag.transformer_adapter"):
        module = importlib.reload(importlib.import_module("mx_rag.transformer_adapter.modeling_bert_adapter"))
    assert module.enable_bert_speed is True
    assert "no fused NPU kernels" in caplog.text
    device_id = 1  # no NPU here: the CPU
    embed = TextEmbedding(model_path=str(minilm_dir()), dev_id=device_id)
    np.testing.assert_allclose(embed.embed_documents(["北京有哪些景点？"]), plain, atol=1e-6)
    assert len(embed.embed_query("北京有哪些景点？")) == 384


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("true", True), ("False", False), ("yes", False)])
def test_boost_values(monkeypatch: pytest.MonkeyPatch, value: str, expected: bool) -> None:
    from mx_rag.transformer_adapter import boost_requested

    monkeypatch.setenv("ENABLE_BOOST", value)
    assert boost_requested() is expected
