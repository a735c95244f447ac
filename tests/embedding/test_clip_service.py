"""CLIPEmbedding against a CLIP service on 127.0.0.1 whose answers come from a real (tiny) CLIP
model: the scripted server's responder runs ImageEmbedding on each request."""

import base64
from collections.abc import Iterator

import numpy as np
import pytest

from mx_rag.embedding.local import ImageEmbedding
from mx_rag.embedding.service import CLIPEmbedding
from mx_rag.errors import ParameterError, RemoteResponseError
from mx_rag.testing import TINY_PNG, RecordedRequest, Reply, ScriptedServer
from mx_rag.utils import ClientParam

PNG = base64.b64encode(TINY_PNG).decode()


@pytest.fixture(scope="module")
def service(clip: ImageEmbedding) -> Iterator[ScriptedServer]:
    def encode(request: RecordedRequest) -> Reply:
        items = request.json["data"]
        out = []
        for item in items:
            vector = clip.embed_query(item["text"]) if "text" in item else clip.embed_images([item["blob"]])[0]
            out.append({"embedding": vector})
        return Reply.json({"data": out})

    with ScriptedServer(responder=encode) as server:
        yield server


@pytest.fixture
def client(service: ScriptedServer) -> CLIPEmbedding:
    service.reset()
    return CLIPEmbedding.create(url=service.url("/encode"), client_param=ClientParam(use_http=True))


def test_reference_example(client: CLIPEmbedding, clip: ImageEmbedding, service: ScriptedServer) -> None:
    docs = client.embed_documents(["abc", "bcd"])
    np.testing.assert_allclose(docs, clip.embed_documents(["abc", "bcd"]), atol=1e-5)
    np.testing.assert_allclose(client.embed_query("abc"), docs[0], atol=1e-5)
    assert service.requests[0].json == {"data": [{"text": "abc"}, {"text": "bcd"}],
                                        "parameters": {"drop_image_content": True}}


def test_images_in_batches(client: CLIPEmbedding, clip: ImageEmbedding, service: ScriptedServer) -> None:
    vectors = client.embed_images([PNG] * 5, batch_size=2)
    assert len(vectors) == 5 and len(service.requests) == 3
    np.testing.assert_allclose(vectors[4], clip.embed_images([PNG])[0], atol=1e-5)
    assert service.requests[0].json["data"] == [{"blob": PNG}, {"blob": PNG}]


def test_wrong_answers_are_remote_errors(client: CLIPEmbedding, service: ScriptedServer) -> None:
    service.enqueue(Reply.json({"data": []}), Reply.json({"data": [{"vector": [1.0]}]}), Reply.json([1, 2]))
    for _ in range(3):
        with pytest.raises(RemoteResponseError):
            client.embed_query("abc")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.embed_documents([]), "texts must hold 1 to"),
        (lambda c: c.embed_documents(["a"], batch_size=0), "batch_size"),
        (lambda c: c.embed_query(""), "text must have length"),
        (lambda c: c.embed_images(["not base64!"]), r"images\[0\] must be a base64 string"),
        (lambda c: c.embed_images([PNG] * 1001), "images must hold 1 to 1000"),
    ],
)
def test_input_checks(client: CLIPEmbedding, call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParameterError, match=message):
        call(client)


def test_url_checks() -> None:
    with pytest.raises(ParameterError, match="url must have length"):
        CLIPEmbedding("http://127.0.0.1/" + "x" * 200, ClientParam(use_http=True))
    with pytest.raises(ParameterError, match="url"):
        CLIPEmbedding("http://127.0.0.1:5000/encode")  # https only by default
