"""LangChain's standard chat-model suites (``langchain-tests``) on ``ChatText2Text`` over a
``Text2TextLLM`` talking to a ``ScriptedServer`` (which echoes the last message when no reply is
queued). Counts are recorded in docs/langchain.md.
"""

from __future__ import annotations

import atexit
import functools
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_tests.integration_tests import ChatModelIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests

from mx_rag.llm import Text2TextLLM
from mx_rag.llm.chat_model import ChatText2Text
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam

from ._marks import ASYNC_SUITE

pytestmark = ASYNC_SUITE


@functools.cache
def server() -> ScriptedServer:
    srv = ScriptedServer().start()
    atexit.register(srv.stop)
    return srv


def llm() -> Text2TextLLM:
    return Text2TextLLM(base_url=server().url("/v1/chat/completions"), model_name="scripted",
                        client_param=ClientParam(use_http=True, retries=0))


class ChatSettings:
    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return ChatText2Text

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"llm": llm()}

    @property
    def has_tool_calling(self) -> bool:
        return False

    @property
    def has_structured_output(self) -> bool:
        return False

    @property
    def returns_usage_metadata(self) -> bool:
        return False


class TestChatText2TextUnit(ChatSettings, ChatModelUnitTests):
    """Binding tools and structured output build without a server, so the unit suite runs them."""

    @property
    def has_tool_calling(self) -> bool:
        return True

    @property
    def has_structured_output(self) -> bool:
        return True


class TestChatText2TextIntegration(ChatSettings, ChatModelIntegrationTests):
    pass


def test_a_chat_prompt_keeps_its_roles() -> None:
    srv = server()
    prompt = ChatPromptTemplate.from_messages([("system", "Answer in French."), ("human", "{q}")])
    srv.enqueue(Reply.chat("Rome."))
    answer = (prompt | ChatText2Text(llm=llm())).invoke({"q": "Capital of Italy?"})
    assert answer.content == "Rome."
    assert srv.requests[-1].json["messages"] == [
        {"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Capital of Italy?"}]
    history = [SystemMessage("Be brief."), HumanMessage("Hi"), AIMessage("Hello."), HumanMessage("Bye")]
    srv.enqueue(Reply.chat("Bye."))
    ChatText2Text(llm=llm()).invoke(history, max_tokens=8)
    sent = srv.requests[-1].json
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "user"]
    assert sent["max_tokens"] == 8
