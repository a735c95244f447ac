"""Each script in examples/ run as a user runs it (``python examples/x.py``), in a subprocess.

The ``llm`` tests start the embedded llama.cpp LLM inside the script (about 5 to 40 s each).
The others use the scripted stand-ins (image services, and an LLM given with ``--llm-url``).
"""

from __future__ import annotations

import ast
import base64
import re
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trustme

from mx_rag.testing import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
LLM_TIMEOUT = 240.0  # seconds for a script that starts the embedded LLM (below pytest's 300 s)
TIMEOUT = 180.0


def run_example(name: str, *args: str, timeout: float = TIMEOUT) -> list[str]:
    """Run ``examples/<name>`` from the repository root; return its stdout lines (exit code 0 required)."""
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, f"{name} exited with {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout.splitlines()


def printed_dict(lines: list[str]) -> dict[str, Any]:
    """The one printed dict (``print(response)``), parsed back."""
    (line,) = [line for line in lines if line.startswith("{")]
    value = ast.literal_eval(line)
    assert isinstance(value, dict)
    return value


def check_answer(response: dict[str, Any], question: str, source: str, threshold: float = 0.6) -> None:
    assert response["query"] == question
    assert isinstance(response["result"], str) and response["result"].strip()
    (doc,) = response["source_documents"]
    assert Path(doc["metadata"]["source"]).name == source and doc["metadata"]["score"] >= threshold
    assert doc["page_content"]


def is_png(data: str) -> bool:
    return base64.b64decode(data).startswith(b"\x89PNG")


@pytest.mark.llm
def test_basic_chat() -> None:
    lines = run_example("basic_chat.py", timeout=LLM_TIMEOUT)
    assert "uploaded 3 of 3 documents" in lines
    question = "What is LayoutParser, the unified toolkit for deep learning based document image analysis?"
    check_answer(printed_dict(lines), question, "layout-parser-paper-fast.pdf")


def test_basic_chat_with_llm_url() -> None:
    """--llm-url: the scripted server echoes the prompt, so the answer shows what the chain sent."""
    with ScriptedServer() as llm:
        lines = run_example("basic_chat.py", "--llm-url", llm.url("/v1/chat/completions"), "--question",
                            "What is LayoutParser?", "--score-threshold", "0.3")
        body = llm.requests[-1].json
    response = printed_dict(lines)
    check_answer(response, "What is LayoutParser?", "layout-parser-paper-fast.pdf", 0.3)
    assert response["result"].startswith("echo: ") and "LayoutParser" in response["result"]
    assert (body["model"], body["max_tokens"], body["temperature"], body["top_p"]) == (
        "Meta-Llama-3-8B-Instruct", 128, 1.0, 0.1)


@pytest.mark.llm
def test_image_and_text() -> None:
    lines = run_example("image_and_text.py", timeout=LLM_TIMEOUT)
    assert any(re.fullmatch(r"uploaded 3 of 3 documents: \d+ chunks, 3 captioned pictures", line) for line in lines)
    response = printed_dict(lines)
    assert response["query"] == "How do I lock the car with the hands-free card?" and response["result"].strip()
    kinds = sorted(doc["metadata"]["type"] for doc in response["source_documents"])
    assert kinds == ["image", "text"]
    image = next(doc for doc in response["source_documents"] if doc["metadata"]["type"] == "image")
    assert image["metadata"]["image_base64"] and "hands-free card" in image["page_content"]
    assert lines[-1] == "sources: 1 text chunk(s), 1 picture(s) with base64"


@pytest.mark.llm
def test_parallel_chain() -> None:
    lines = run_example("parallel_chain.py", timeout=LLM_TIMEOUT)
    assert "uploaded 3 of 3 documents" in lines
    answer = printed_dict(lines)
    assert answer["prompt"] == "How do I add a bullet slide?"
    check_answer(answer, "How do I add a bullet slide?", "fake-power-point.pptx")


@pytest.mark.llm
def test_multi_query() -> None:
    lines = run_example("multi_query.py", timeout=LLM_TIMEOUT)
    assert "uploaded 3 of 3 documents" in lines
    (printed,) = [line for line in lines if line.startswith("[")]
    assert printed.startswith("[Document(metadata={'source': ")
    assert "layout-parser-paper-fast.pdf" in printed and "LayoutParser" in printed


def test_text2img() -> None:
    lines = run_example("text2img.py")
    data = printed_dict(lines)
    assert data["prompt"] == "dog wearing black glasses" and is_png(data["result"])
    assert lines[-1] == "image: 73 bytes, PNG"


def test_text2img_with_https_url_and_ca_file(tmp_path: Path) -> None:
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    with ScriptedServer(ssl_context=context) as service:
        lines = run_example("text2img.py", "--url", service.url("/sd/text2img"), "--ca-file",
                            str(tmp_path / "ca.crt"), "--prompt", "a red square")
        body = service.requests[-1].json
    assert printed_dict(lines)["prompt"] == "a red square"
    assert (body["prompt"], body["output_format"], body["model_name"]) == ("a red square", "jpg", "sd")


def test_img2img() -> None:
    lines = run_example("img2img.py")
    assert "uploaded 2 of 2 images" in lines
    data = printed_dict(lines)
    assert data["prompt"].startswith("a pink frangipani flower") and is_png(data["result"])
    assert re.fullmatch(r"the description matches: (example\.jpg|table-multi-row-column-cells\.png); "
                        r"generated image: 73 bytes", lines[-1])
