# SPDX-License-Identifier: Apache-2.0
"""Seed 000, SingleText2TextChain «图文并茂对话功能» (answers with text and images), as a runnable script.

Changed from the seed, and why (everything else is the seed's code, in the seed's order):
- the VLM: no vision-language model ships offline, so `mx_rag.testing.ScriptedServer` stands in for the
  Qwen2.5-VL service (plain http, ClientParam(use_http=True)). It answers the caption requests, in order, with
  STAND_IN_CAPTIONS, written by hand for the three pictures of tests/data/docs/embedded-images.pdf (then with
  echoes of the prompt). Everything else is real: the loaders find the pictures and send them to the VLM, the
  captions are embedded and retrieved, quoted to the LLM, and returned with each picture's base64.
  Pass --vlm-url/--vlm-model (and --ca-file) for a real VLM.
- the chat LLM: the embedded llama.cpp server ($MXRAG_LLM_MODEL or the default) started by LocalLLMServer, over
  http with ClientParam(use_http=True) instead of https + ca_file; --llm-url/--llm-model for a real one.
- no `from paddle.base import libpaddle`; `langchain_text_splitters` instead of `langchain.text_splitter`;
  unused or duplicate imports dropped (ruff rejects them).
- embedding: the packaged all-MiniLM-L6-v2 instead of /path/to/bge-large-zh-v1.5, so MindFAISS x_dim=384.
- paths: index and databases in a temporary folder; the documents (a PDF with pictures, a Word file and a
  PowerPoint file) from tests/data/docs, which is also the white path.
- user_content_builder and TEXT_INFER_PROMPT are the seed's, verbatim, except that the builder's docstring is
  indented like its body (the seed's 7-space docstring is an IndentationError) and `noqa` marks keep ruff quiet
  about the seed's typing.List, placeholder-less f-string and long prompt lines.
- question: about the shipped car manual page instead of mxVision; Retriever k=2 instead of 1, so the answer
  can quote a text chunk and a picture; max_tokens 128 instead of 1024 (a small CPU model).

Run (after `make setup`): .venv/bin/python examples/image_and_text.py [--question TEXT] [--llm-url URL ...]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path
from typing import List  # noqa: UP035 (the seed's annotation)

from _common import DOCS, add_llm_arguments, client_param_for, llm_endpoint
from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from mx_rag.chain import SingleText2TextChain
from mx_rag.document import LoaderMng
from mx_rag.document.loader import DocxLoader, PdfLoader, PowerPointLoader
from mx_rag.embedding.local import TextEmbedding
from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
from mx_rag.knowledge.handler import upload_files
from mx_rag.llm import Img2TextLLM, LLMParameterConfig, Text2TextLLM
from mx_rag.retrievers import Retriever
from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import Reply, ScriptedServer

FILES = [DOCS / "embedded-images.pdf", DOCS / "contains-pictures.docx", DOCS / "fake-power-point.pptx"]
QUESTION = "How do I lock the car with the hands-free card?"
# What the stand-in VLM answers for the pictures of embedded-images.pdf, in the order the loader sends them.
STAND_IN_CAPTIONS = [
    "A car seen from above, surrounded by a dark oval: the access zone of the hands-free card, the area around "
    "the vehicle in which the card locks and unlocks it.",
    "The same car seen from above without the access zone: doors and luggage compartment closed.",
    "The hands-free key card: a grey card with four buttons, lock, unlock, lights and tailgate.",
]


# 定义回调函数，整合问题和检索到的文本与图片描述，生成大模型对话中角色user的content的内容
def user_content_builder(query: str, docs: List[Document], *args, **kwargs):  # noqa: UP006
    """
    参数说明：
    query : str, 用户原始提问内容。例如：“请根据以下材料总结关键要点。”
    docs : List[Document],从检索器（retriever）返回的文档对象列表。
           每个 Document 通常包含：page_content：文档内容文本；metadata：元信息（如来源、标题、分数等）。
    返回：
    str : 拼接后的完整 prompt 文本，作为大模型输入内容。
    """
    text_docs = [doc for doc in docs if doc.metadata.get("type", "") == "text"]
    img_docs = [doc for doc in docs if doc.metadata.get("type", "") == "image"]
    user_message = []
    if len(text_docs) > 0:
        # 2. Add text quotes
        user_message.append(f"Text Quotes are:")  # noqa: F541
        for i, doc in enumerate(text_docs):
            user_message.append(f"\n[{i + 1}] {doc.page_content}")
    if len(img_docs) > 0:
        # 3. Add image quotes vlm-text or ocr-text
        user_message.append("\nImage Quotes are:")
        for i, doc in enumerate(img_docs):
            user_message.append(f"\nimage{i + 1} is described as: {doc.page_content}")
    user_message.append("\n\n")
    # 4. add user question
    user_message.append(f"The user question is: {query}")
    return ''.join(user_message)


# 系统prompt
TEXT_INFER_PROMPT = '''
You are a helpful question-answering assistant. Your task is to generate a interleaved text and image response based on provided questions and quotes. Here‘s how to refine your process:

1. **Evidence Selection**:
   - From both text and image quotes, pinpoint those really relevant for answering the question. Focus on significance and direct relevance.
   - Each image quote is the description of the image.

2. **Answer Construction**:
   - Use Markdown to embed text and images in your response, avoid using obvious headings or divisions; ensure the response flows naturally and cohesively.
   - Conclude with a direct and concise answer to the question in a simple and clear sentence.

3. **Quote Citation**:
   - Cite images using the format `![{conclusion}](image index)`; for the first image, use `![{conclusion}](image1)`;The {conclusion} should be a concise one-sentence summary of the image’s content.
   - Ensure the cite of the image must strict follow `![{conclusion}](image index)`, do not simply stating "See image1", "image1 shows" ,"[image1]" or "image1".
   - Each image or text can only be quoted once.

- Do not cite irrelevant quotes.
- Compose a detailed and articulate interleaved answer to the question.
- Ensure that your answer is logical, informative, and directly ties back to the evidence provided by the quotes.
- If Quote contain text and image, answer must contain both text and image response.
- If Quote only contain text, answer must contain text response, do not contain image.
- Answer in chinese.
'''  # noqa: E501


def main(args: argparse.Namespace, workdir: Path, vlm_url: str, vlm_model: str, llm_url: str, llm_model: str) -> None:
    # 加载用于解析文档中图片的视觉大模型
    vlm = Img2TextLLM(base_url=vlm_url,
                      model_name=vlm_model,
                      llm_config=LLMParameterConfig(max_tokens=512),
                      client_param=client_param_for(vlm_url, args.ca_file)
                      )
    loader_mng = LoaderMng()
    # 文档加载器，可以使用mxrag自有的，也可以使用langchain的
    loader_mng.register_loader(loader_class=PdfLoader, file_types=[".pdf"], loader_params={"vlm": vlm})
    loader_mng.register_loader(loader_class=DocxLoader, file_types=[".docx"], loader_params={"vlm": vlm})
    loader_mng.register_loader(loader_class=PowerPointLoader, file_types=[".pptx"], loader_params={"vlm": vlm})
    # 加载文档切分器，使用langchain的
    loader_mng.register_splitter(splitter_class=RecursiveCharacterTextSplitter,
                                 file_types=[".pdf", ".docx", ".txt", ".md", ".xlsx", ".pptx"],
                                 splitter_params={"chunk_size": 750,
                                                  "chunk_overlap": 150,
                                                  "keep_separator": False})

    dev = 0
    # 加载embedding模型 (the packaged all-MiniLM-L6-v2, 384 dimensions)
    emb = TextEmbedding("all-MiniLM-L6-v2", dev_id=dev)
    # 初始化向量数据库
    vector_store = MindFAISS(x_dim=384, devs=[dev],
                             load_local_index=str(workdir / "faiss.index"),
                             auto_save=True)
    # 初始化文档chunk关系数据库
    chunk_store = SQLiteDocstore(db_path=str(workdir / "sql.db"))
    # 初始化知识管理关系数据库
    knowledge_store = KnowledgeStore(db_path=str(workdir / "sql.db"))
    # 添加知识库
    knowledge_store.add_knowledge("test", "Default", "admin")
    # 初始化知识库管理
    knowledge_db = KnowledgeDB(knowledge_store=knowledge_store,
                               chunk_store=chunk_store,
                               vector_store=vector_store,
                               knowledge_name="test",
                               white_paths=[str(DOCS)],
                               user_id="Default"
                               )
    # 上传文档到知识库
    failed = upload_files(knowledge_db, [str(f) for f in FILES], loader_mng, emb.embed_documents, True)
    chunks = [d for doc_id in knowledge_db.document_ids() for d in chunk_store.search_by_document_id(doc_id)]
    images = sum(1 for d in chunks if d.metadata.get("type") == "image")
    print(f"uploaded {len(FILES) - len(failed)} of {len(FILES)} documents: "
          f"{len(chunks)} chunks, {images} captioned pictures")

    # 用于对话的语言大模型
    llm = Text2TextLLM(model_name=llm_model,
                       base_url=llm_url,
                       client_param=client_param_for(llm_url, args.ca_file))
    sys_messages = [{"role": "system", "content": TEXT_INFER_PROMPT}]
    r = Retriever(vector_store=vector_store, document_store=chunk_store, embed_func=emb.embed_documents, k=args.k,
                  score_threshold=args.score_threshold)
    rag = SingleText2TextChain(retriever=r, llm=llm, sys_messages=sys_messages,
                               user_content_builder=user_content_builder)
    response = rag.query(args.question, LLMParameterConfig(max_tokens=128, temperature=1.0, top_p=0.1))
    # 回答的source_documents中可能会有图片，可在字典metadata中获取图片base64编码
    print(response)
    kinds = [doc["metadata"]["type"] for doc in response["source_documents"]]
    print(f"sources: {kinds.count('text')} text chunk(s), {kinds.count('image')} picture(s) with base64")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--score-threshold", type=float, default=0.6)
    parser.add_argument("--vlm-url", help="a real VLM's .../v1/chat/completions URL (default: the scripted stand-in)")
    parser.add_argument("--vlm-model", default="Qwen2.5-VL-7B-Instruct", help="model name for --vlm-url")
    add_llm_arguments(parser, "Meta-Llama-3-8B-Instruct", ca_help="CA certificate for https URLs")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    with tempfile.TemporaryDirectory(prefix="mxrag-image-and-text-") as tmp, contextlib.ExitStack() as stack:
        if arguments.vlm_url:
            vlm_url, vlm_model = arguments.vlm_url, arguments.vlm_model
        else:
            stand_in = stack.enter_context(ScriptedServer())  # the stand-in VLM: scripted captions, then echoes
            stand_in.enqueue(*(Reply.chat(caption) for caption in STAND_IN_CAPTIONS))
            vlm_url, vlm_model = stand_in.url("/openai/v1/chat/completions"), arguments.vlm_model
        main(arguments, Path(tmp), vlm_url, vlm_model, *llm_endpoint(arguments, stack))
