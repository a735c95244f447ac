"""Text2TextLLM end to end against the real embedded llama.cpp server (SmolLM2-135M)."""

import concurrent.futures
import itertools

import pytest

from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.utils import ClientParam

pytestmark = pytest.mark.llm

GREEDY = LLMParameterConfig(max_tokens=24, temperature=0.0, seed=7)


@pytest.fixture(scope="module")
def real_llm(local_llm: object) -> Text2TextLLM:
    return Text2TextLLM(base_url=local_llm.chat_url, model_name=local_llm.model_name,  # type: ignore[attr-defined]
                        client_param=ClientParam(use_http=True, timeout=600))


def test_chat_answers(real_llm: Text2TextLLM) -> None:
    sys_messages = [{"role": "system", "content": "You are a helpful assistant. Answer briefly."}]
    answer = real_llm.chat("What is the capital of France?", sys_messages=sys_messages, llm_config=GREEDY)
    assert isinstance(answer, str) and answer.strip()
    assert len(sys_messages) == 1


def test_stream_equals_non_stream_under_greedy_decoding(real_llm: Text2TextLLM) -> None:
    question = "Name three colours."
    full = real_llm.chat(question, llm_config=GREEDY)
    texts = list(real_llm.chat_streamly(question, llm_config=GREEDY))
    assert len(texts) > 1
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))  # cumulative
    assert texts[-1] == full


def test_max_tokens_truncation_is_marked(real_llm: Text2TextLLM) -> None:
    answer = real_llm.chat("Write a long story about a dragon.", llm_config=GREEDY.replace(max_tokens=4))
    assert answer.endswith("......")


def test_langchain_stream_concatenates_to_answer(real_llm: Text2TextLLM) -> None:
    question = "Say hello."
    expected = real_llm.chat(question, llm_config=GREEDY)
    llm = real_llm.model_copy(update={"llm_config": GREEDY})
    deltas = list(llm.stream(question))
    assert "".join(deltas) == expected


def test_one_client_from_many_threads(real_llm: Text2TextLLM) -> None:
    questions = [f"What is {i} plus {i}?" for i in range(4)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda q: real_llm.chat(q, llm_config=GREEDY), questions))
    assert all(a.strip() for a in answers)
