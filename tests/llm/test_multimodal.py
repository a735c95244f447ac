"""Img2TextLLM, Text2ImgMultiModel and Img2ImgMultiModel on the wire."""

import base64

import pytest

from mx_rag.errors import ParameterError, RemoteResponseError, RemoteStatusError
from mx_rag.llm import Img2ImgMultiModel, Img2TextLLM, LLMParameterConfig, Text2ImgMultiModel
from mx_rag.testing import TINY_PNG, Reply, ScriptedServer
from mx_rag.utils import ClientParam

PNG_B64 = base64.b64encode(TINY_PNG).decode()
DATA_URL = f"data:image/png;base64,{PNG_B64}"


@pytest.fixture
def vlm(server: ScriptedServer, param: ClientParam) -> Img2TextLLM:
    return Img2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="vl", client_param=param,
                       llm_config=LLMParameterConfig(max_tokens=64))


def test_img2text_sends_image_url_content(vlm: Img2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("a bar chart"))
    assert vlm.chat({"url": DATA_URL}) == "a bar chart"
    body = server.requests[0].json
    text_part, image_part = body["messages"][-1]["content"]
    assert text_part == {"type": "text", "text": vlm.prompt}
    assert image_part == {"type": "image_url", "image_url": {"url": DATA_URL}}
    assert body["max_tokens"] == 64  # the instance config is used when the call passes none


def test_img2text_per_call_prompt(vlm: Img2TextLLM, server: ScriptedServer) -> None:
    vlm.chat({"url": DATA_URL}, prompt="Describe in English.")
    assert server.requests[0].json["messages"][-1]["content"][0]["text"] == "Describe in English."


def test_img2text_langchain_invoke_takes_a_data_url(vlm: Img2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("caption"))
    assert vlm.invoke(DATA_URL) == "caption"


@pytest.mark.parametrize(
    "image_url",
    [
        "data:image/png;base64,AAAA",
        {"url": DATA_URL, "detail": "high"},
        {"url": "https://example.com/cat.png"},
        {"url": "data:image/png;base64,not*base64"},
        {"url": "data:image/png;base64,"},
        {"url": "data:text/plain;base64,aGk="},
        {"url": ""},
    ],
)
def test_img2text_rejects_bad_image_url(vlm: Img2TextLLM, server: ScriptedServer, image_url: object) -> None:
    with pytest.raises(ParameterError, match="image_url"):
        vlm.chat(image_url)  # type: ignore[arg-type]
    assert server.requests == []


def test_img2text_rejects_bad_prompt(server: ScriptedServer, param: ClientParam) -> None:
    with pytest.raises(ParameterError, match="prompt"):
        Img2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="vl", client_param=param, prompt="")


@pytest.fixture
def text2img(server: ScriptedServer, param: ClientParam) -> Text2ImgMultiModel:
    return Text2ImgMultiModel(url=server.url("/text2img"), model_name="sd", client_param=param)


@pytest.fixture
def img2img(server: ScriptedServer, param: ClientParam) -> Img2ImgMultiModel:
    return Img2ImgMultiModel(url=server.url("/img2img"), model_name="sd", client_param=param)


def test_text2img_payload_and_raw_image_becomes_base64(text2img: Text2ImgMultiModel, server: ScriptedServer) -> None:
    result = text2img.text2img("dog wearing black glasses", output_format="jpg", size="256*256")
    assert result == {"prompt": "dog wearing black glasses", "result": PNG_B64}
    assert server.requests[0].json == {"prompt": "dog wearing black glasses", "output_format": "jpg",
                                       "size": "256*256", "model_name": "sd"}


@pytest.mark.parametrize("key", ["image", "images", "data"])
def test_text2img_json_answers(text2img: Text2ImgMultiModel, server: ScriptedServer, key: str) -> None:
    value = {"image": PNG_B64, "images": [PNG_B64], "data": [{"b64_json": PNG_B64}]}[key]
    server.enqueue(Reply.json({key: value}))
    assert text2img.text2img("cat")["result"] == PNG_B64


def test_img2img_payload_and_result(img2img: Img2ImgMultiModel, server: ScriptedServer) -> None:
    result = img2img.img2img("make him a knight", image_content=PNG_B64)
    assert result == {"prompt": "make him a knight", "result": PNG_B64}
    assert server.requests[0].json == {"prompt": "make him a knight", "image": PNG_B64,
                                       "size": "512*512", "model_name": "sd"}


def test_image_failures_raise(text2img: Text2ImgMultiModel, img2img: Img2ImgMultiModel,
                              server: ScriptedServer) -> None:
    server.enqueue(Reply.status(400, "bad size"), Reply.json({"unexpected": 1}))
    with pytest.raises(RemoteStatusError, match="bad size"):
        text2img.text2img("cat")
    with pytest.raises(RemoteResponseError, match="no image"):
        img2img.img2img("cat", image_content=PNG_B64)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"prompt": ""}, "prompt"),
        ({"prompt": "x" * (1024 * 1024 + 1)}, "prompt"),
        ({"prompt": "cat", "output_format": "gif"}, "output_format"),
        ({"prompt": "cat", "size": "512x512"}, "size"),
        ({"prompt": "cat", "size": "123456*1"}, "size"),
        ({"prompt": "cat", "size": "512*512\n"}, "size"),
    ],
)
def test_text2img_limits(text2img: Text2ImgMultiModel, server: ScriptedServer, kwargs: dict, name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        text2img.text2img(**kwargs)
    assert server.requests == []


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"prompt": "", "image_content": "AAAA"}, "prompt"),
        ({"prompt": "p", "image_content": ""}, "image_content"),
        ({"prompt": "p", "image_content": "A" * (10 * 1024 * 1024 + 1)}, "image_content"),
        ({"prompt": "p", "image_content": "AAAA", "size": "big"}, "size"),
    ],
)
def test_img2img_limits(img2img: Img2ImgMultiModel, kwargs: dict, name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        img2img.img2img(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"url": "http://h/x"}, "use_http"), ({"url": "https://h/x", "model_name": ""}, "model_name"),
     ({"url": "https://h/x", "client_param": "p"}, "client_param")],
)
def test_image_model_constructor_limits(kwargs: dict, name: str) -> None:
    for cls in (Text2ImgMultiModel, Img2ImgMultiModel):
        with pytest.raises(ParameterError, match=name):
            cls(**kwargs)
