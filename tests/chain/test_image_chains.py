"""Text2ImgChain and Img2ImgChain against the scripted image endpoints."""

import base64

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from mx_rag.chain import Img2ImgChain, Text2ImgChain
from mx_rag.errors import ParameterError
from mx_rag.llm import Img2ImgMultiModel, Text2ImgMultiModel
from mx_rag.testing import TINY_PNG, ScriptedServer
from mx_rag.utils import ClientParam

PNG = base64.b64encode(TINY_PNG).decode()
PARAM = ClientParam(use_http=True, retries=0)


class StaticRetriever(BaseRetriever):
    docs: list[Document]

    def _get_relevant_documents(self, query, *, run_manager=None):  # type: ignore[no-untyped-def]
        return list(self.docs)


def test_text2img_chain(server: ScriptedServer) -> None:
    chain = Text2ImgChain(multi_model=Text2ImgMultiModel(model_name="sd", url=server.url("/text2img"),
                                                         client_param=PARAM))
    result = chain.query("dog wearing black glasses", output_format="jpg")
    assert result == {"prompt": "dog wearing black glasses", "result": PNG}
    assert server.requests[0].json["output_format"] == "jpg" and server.requests[0].json["size"] == "512*512"
    with pytest.raises(ParameterError, match="output_format"):
        chain.query("dog", output_format="gif")
    with pytest.raises(ParameterError, match="multi_model"):
        Text2ImgChain(multi_model="sd")  # type: ignore[arg-type]


def test_img2img_chain_sends_the_retrieved_image(server: ScriptedServer) -> None:
    model = Img2ImgMultiModel(model_name="sd", url=server.url("/img2img"), client_param=PARAM)
    chain = Img2ImgChain(multi_model=model, retriever=StaticRetriever(docs=[Document(page_content=PNG)]))
    result = chain.query("查找小男孩图片", prompt="he is a knight", size="256*256")
    assert result == {"prompt": "he is a knight", "result": PNG}
    assert server.requests[0].json["image"] == PNG


def test_img2img_chain_with_nothing_retrieved(server: ScriptedServer) -> None:
    model = Img2ImgMultiModel(model_name="sd", url=server.url("/img2img"), client_param=PARAM)
    chain = Img2ImgChain(multi_model=model, retriever=StaticRetriever(docs=[]))
    assert chain.query("nothing", prompt="p") == {"prompt": "p", "result": ""}
    assert server.requests == []
    with pytest.raises(ParameterError, match="prompt"):
        chain.query("nothing")
