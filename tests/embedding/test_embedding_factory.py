"""EmbeddingFactory and the ``create`` hook: real MiniLM, a tiny CLIP, TEI on the scripted server."""

from pathlib import Path

import numpy as np
import pytest
from embedding_helpers import fake_vector

from mx_rag.embedding import EmbeddingFactory
from mx_rag.embedding.local import ImageEmbedding, TextEmbedding
from mx_rag.embedding.local.model_info import minilm_dir
from mx_rag.embedding.service import TEIEmbedding
from mx_rag.errors import ParameterError
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam


def test_local_text_embedding_matches_the_class(minilm: TextEmbedding) -> None:
    emb = EmbeddingFactory.create_embedding(embedding_type="local_text_embedding",
                                            model_path=str(minilm_dir()), dev_id=0)
    assert isinstance(emb, TextEmbedding)
    np.testing.assert_allclose(emb.embed_query("abc"), minilm.embed_query("abc"), atol=1e-5)


def test_local_images_embedding(clip_dir: Path) -> None:
    emb = EmbeddingFactory.create_embedding(embedding_type="local_images_embedding", model_name="ViT-B-16",
                                            model_path=str(clip_dir), dev_id=0)
    assert isinstance(emb, ImageEmbedding)
    assert len(emb.embed_query("abc")) == emb.dimension


def test_tei_embedding_over_http(tei_server: ScriptedServer) -> None:
    tei_server.reset()
    tei_server.enqueue(Reply.json([fake_vector("abc")]))
    emb = EmbeddingFactory.create_embedding(embedding_type="tei_embedding", url=tei_server.url("/embed"),
                                            client_param=ClientParam(use_http=True))
    assert isinstance(emb, TEIEmbedding)
    assert emb.embed_query("abc") == pytest.approx(fake_vector("abc"))
    assert tei_server.requests[0].json["inputs"] == ["abc"]


def test_create_is_the_constructor() -> None:
    emb = TextEmbedding.create(model_path=str(minilm_dir()), dev_id=0, use_fp16=False)
    assert isinstance(emb, TextEmbedding) and emb.dimension == 384


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "embedding_type is required"),
        ({"embedding_type": "npu_magic"}, "embedding_type must be one of"),
        ({"embedding_type": 3}, "embedding_type must be one of"),
        ({"embedding_type": "tei_embedding"}, "needs the parameter 'url'"),
        ({"embedding_type": "local_text_embedding", "dev_id": 64}, "dev_id must be"),
        ({"embedding_type": "local_text_embedding", "devid": 1}, "unknown parameters \\['devid'\\]"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs: dict, message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        EmbeddingFactory.create_embedding(**kwargs)
