# SPDX-License-Identifier: Apache-2.0
"""Graph RAG fixtures: HotpotQA paragraphs as files, and an LLM that answers each extraction
prompt with a fixed (often malformed) JSON chosen by the paragraph in the prompt."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mx_rag.document import LoaderMng
from mx_rag.graphrag import GraphRAGPipeline
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import HashEmbedding, RecordedRequest, Reply, ScriptedServer
from mx_rag.utils import ClientParam

HOTPOT = Path(__file__).resolve().parents[1] / "data" / "multihop" / "hotpotqa_sample.json"
DIM = 256
TITLES = {
    "krilanovich": "Grace Krilanovich",
    "two_dollar_radio": "Two Dollar Radio",
    "onufri": "Onufri Publishing House",
    "gyldendal": "Gyldendal",
}
QUESTION = "Where is the publisher of Grace Krilanovich's first novel based?"

# code fence, trailing commas, a name written in another case
KRILANOVICH = """Sure! Here is the JSON:
```json
{"entities": [{"name": "Grace Krilanovich", "type": "person", "description": "an American author born in 1979"},
  {"name": "The Orange Eats Creeps", "type": "novel", "description": "her first novel",},
  {"name": "Two Dollar Radio", "type": "publisher"},],
 "relations": [{"source": "Grace Krilanovich", "target": "The Orange Eats Creeps", "relation": "wrote"},
  {"source": "The Orange Eats Creeps", "target": "two dollar radio", "relation": "published by",
   "description": "in September 2010"},]}
```"""
# single quotes, two relations between one pair, cut off in the middle of the last relation
TWO_DOLLAR_RADIO = (
    "{'entities': [{'name': 'Two Dollar Radio', 'type': 'publisher', 'description': 'an independent "
    "mom-and-pop publishing house'}, {'name': 'Columbus, Ohio', 'type': 'place'}, {'name': 'Eric Obenauf'}], "
    "'relations': [{'source': 'Two Dollar Radio', 'target': 'Columbus, Ohio', 'relation': 'based in'}, "
    "{'source': 'Eric Obenauf', 'target': 'Two Dollar Radio', 'relation': 'founded'}, "
    "{'source': 'Two Dollar Radio', 'target': 'Columbus, Ohio', 'relation': 'opens headquarters in'}, "
    "{'source': 'Eliza Jane Wood-Obenauf', 'targ"
)
# Chinese keys
ONUFRI = json.dumps({
    "实体": [{"名称": "Onufri Publishing House", "类型": "publisher"}, {"名称": "Tirana", "类型": "city"}],
    "关系": [{"头实体": "Onufri Publishing House", "关系": "based in", "尾实体": "Tirana"},
           {"头实体": "Bujar Hudhri", "关系": "founded", "尾实体": "Onufri Publishing House"}],
}, ensure_ascii=False)
GYLDENDAL = "I am sorry, I can only describe Gyldendal in prose: it is a Danish publishing house."
REPLIES = {"krilanovich": KRILANOVICH, "two_dollar_radio": TWO_DOLLAR_RADIO, "onufri": ONUFRI,
           "gyldendal": GYLDENDAL}


def paragraphs() -> dict[str, str]:
    """The HotpotQA context paragraphs named in TITLES, by file stem."""
    found: dict[str, str] = {}
    for item in json.loads(HOTPOT.read_text()):
        for title, sentences in item["context"]:
            found.setdefault(title, "".join(sentences))
    return {stem: found[title] for stem, title in TITLES.items()}


PARAGRAPHS = paragraphs()
# a toy two-hop corpus: the founder of Zentrix Labs has her own passage
TOY = {
    "zentrix": "Zentrix Labs: Zentrix Labs is a robotics company in Oslo. Zentrix Labs was founded by Marta "
               "Okonkwo in 2011.",
    "okonkwo": "Marta Okonkwo: Marta Okonkwo is an engineer. She was born in Lisbon and studied in Porto.",
    "halvex": "Halvex Systems: The founder of Halvex Systems, Piotr Nowak, was born in the city of Krakow.",
    "orbis": "Orbis Robotics: The founder of Orbis Robotics, Lena Fischer, was born in the city of Munich.",
    "berlin": "Zentrix Labs office: Zentrix Labs opened a second robotics office in Berlin in 2015.",
    "kestrel": "Kestrel Dynamics: The robotics company Kestrel Dynamics was founded in the city of Oslo by Ivar "
               "Berg, who was born there.",
}  # fmt: skip
TOY_QUESTION = "Where was the person who founded Zentrix born?"



class RoutedServer(ScriptedServer):
    """A ScriptedServer that, with its queue empty, answers through ``route`` (None: echo)."""

    def __init__(self, route: Callable[[RecordedRequest], Reply | None]) -> None:
        super().__init__()
        self._route = route

    def _take(self, record: RecordedRequest) -> Reply | None:
        reply = super()._take(record)
        return reply if reply is not None else self._route(record)


def last_message(record: RecordedRequest) -> str:
    messages = (record.json or {}).get("messages") or [{}]
    return str(messages[-1].get("content", ""))


def extraction_reply(record: RecordedRequest) -> Reply | None:
    prompt = last_message(record)
    if "Passage:" not in prompt and "段落：" not in prompt:
        return None
    for stem, text in PARAGRAPHS.items():
        if text[:60] in prompt:
            return Reply.chat(REPLIES[stem])
    return None


def extraction_requests(server: ScriptedServer) -> list[RecordedRequest]:
    return [r for r in server.requests if "Passage:" in last_message(r)]


@pytest.fixture
def server() -> Iterator[RoutedServer]:
    with RoutedServer(extraction_reply) as srv:
        yield srv


@pytest.fixture
def llm(server: ScriptedServer) -> Text2TextLLM:
    return Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted",
                        client_param=ClientParam(use_http=True, retries=0))


def write_texts(folder: Path, texts: dict[str, str]) -> dict[str, Path]:
    """``texts`` as ``folder/<stem>.txt`` files (the folder is made), by stem."""
    folder.mkdir()
    paths = {}
    for stem, text in texts.items():
        paths[stem] = folder / f"{stem}.txt"
        paths[stem].write_text(text, encoding="utf-8")
    return paths


@pytest.fixture
def docs(tmp_path: Path) -> dict[str, Path]:
    """The paragraphs as text files (one chunk each), by stem."""
    return write_texts(tmp_path / "docs", PARAGRAPHS)


@pytest.fixture
def loader_mng() -> LoaderMng:
    return LoaderMng.with_defaults(chunk_size=2000, chunk_overlap=0)


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def make_pipeline(work_dir: Path, llm: Text2TextLLM) -> Callable[..., GraphRAGPipeline]:
    def make(**kwargs: object) -> GraphRAGPipeline:
        return GraphRAGPipeline(work_dir, llm, HashEmbedding(DIM), DIM, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def built(
    make_pipeline: Callable[..., GraphRAGPipeline], docs: dict[str, Path], loader_mng: LoaderMng
) -> GraphRAGPipeline:
    pipeline = make_pipeline()
    pipeline.upload_files(list(docs.values()), loader_mng)
    pipeline.build_graph(max_workers=4)
    return pipeline


@pytest.fixture(scope="module")
def postgres_url() -> str:
    """The test database of ``make test``; PostgreSQL tests skip without it."""
    url = os.environ.get("MXRAG_TEST_POSTGRES_URL", "").strip()
    if not url:
        pytest.skip("MXRAG_TEST_POSTGRES_URL is not set: run with url=$(scripts/ensure_postgres.sh) and "
                    "MXRAG_TEST_POSTGRES_URL=$url (make test does this)")  # fmt: skip
    return url


@pytest.fixture(scope="session")
def minilm_toy(tmp_path_factory: pytest.TempPathFactory) -> GraphRAGPipeline:
    from mx_rag.embedding.local import TextEmbedding

    root = tmp_path_factory.mktemp("facts")
    paths = write_texts(root / "toy", TOY)
    (root / "work").mkdir()
    pipeline = GraphRAGPipeline(root / "work", None, TextEmbedding("all-MiniLM-L6-v2"), 384)  # spaCy + MiniLM
    pipeline.upload_files(list(paths.values()), LoaderMng.with_defaults(chunk_size=2000, chunk_overlap=0))
    pipeline.build_graph()
    return pipeline
