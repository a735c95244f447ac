# SPDX-License-Identifier: Apache-2.0
"""Benchmark ``mx_rag.llm.Text2TextLLM`` against the official ``openai`` client.

Both clients send the same chat-completion requests (same JSON body) to one in-process
``mx_rag.testing.ScriptedServer``, which echoes each question back (``"echo: <question>"``), as
one JSON answer or as an SSE stream of one event per word. The server does no model work, so
what is measured is the client-side cost of a call: building and sending the request, reading and
parsing the answer, plus the (equal) cost of the server.

Scenarios, each run for both clients:

* ``chat_sequential``: ``Text2TextLLM.chat`` / ``chat.completions.create``, one request at a time;
* ``stream_sequential``: ``chat_streamly`` / ``create(stream=True)``, the whole stream consumed;
  also reports the time to the first content token (TTFT);
* ``chat_concurrent``: a ``ThreadPoolExecutor`` of ``--threads`` threads sharing one client.

Each client gets warm-up requests first (connections opened, caches filled); then the clients take
turns in ``--rounds`` rounds of ``--requests`` requests, the first client alternating each round
(AB, BA, AB, ...), so that machine noise and drift hit both. Every answer is compared with the
expected echo, and both clients' request bodies are checked to be equal: any difference exits 1.

Output: JSON lines on stdout, nothing else. The first line describes the environment; then, per
scenario, one line per client (``rps``, latency percentiles in ms) and one summary line with
``ratio_rps = mx_rag_rps / openai_rps`` and ``ratio_p50 = openai_p50 / mx_rag_p50`` (above 1:
mx_rag is faster).

Run::

    .venv/bin/python bench/llm_client.py            # full run (about 30 s on 2 cores)
    .venv/bin/python bench/llm_client.py --quick    # smoke run, a few seconds
    .venv/bin/python bench/llm_client.py --requests 500 --rounds 4 --threads 16
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import openai
from _harness import emit, environment, ms, package_version, percentile, positive_int, rotated

from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.testing import ScriptedServer
from mx_rag.utils import ClientParam

BENCH = "llm_client"
MODEL = "scripted"
MAX_TOKENS = 64
OPENAI_RETRIES = 3  # ClientParam's default retries, so both clients behave alike on errors
QUESTION = "What is retrieval-augmented generation, and when should a team use it? (request {n})"
CLIENTS = ("mx_rag", "openai")

# An operation sends one question and returns (answer, perf_counter() at the first content token).
Operation = Callable[[str], tuple[str, float | None]]


class BenchError(Exception):
    """A client gave a wrong answer or sent a different request: the figures would be meaningless."""


@dataclass(frozen=True)
class Scenario:
    name: str
    stream: bool
    threads: int  # 1: sequential, in the calling thread


@dataclass(frozen=True)
class Sample:
    latency: float
    ttft: float | None


@dataclass
class Tally:
    """All samples and timed wall-clock seconds of one client in one scenario."""

    samples: list[Sample] = field(default_factory=list)
    wall: float = 0.0


# -- questions and answers ---------------------------------------------------------------------

_serial = itertools.count()


def next_questions(count: int) -> list[str]:
    """Distinct questions (so that no layer can cache an answer)."""
    return [QUESTION.format(n=next(_serial)) for _ in range(count)]


def expected_answer(question: str) -> str:
    """What ScriptedServer echoes for a question shorter than MAX_TOKENS words."""
    return "echo: " + question


def check_answer(client: str, question: str, answer: str) -> None:
    if answer != expected_answer(question):
        raise BenchError(f"{client} answered {answer!r}, expected {expected_answer(question)!r}")


# -- the two clients ---------------------------------------------------------------------------


def mx_rag_operation(llm: Text2TextLLM, stream: bool) -> Operation:
    config = LLMParameterConfig(max_tokens=MAX_TOKENS)

    def chat(question: str) -> tuple[str, float | None]:
        return llm.chat(question, llm_config=config), None

    def chat_streamly(question: str) -> tuple[str, float | None]:
        answer, first = "", None
        for text in llm.chat_streamly(question, llm_config=config):  # each item: the answer so far
            if first is None:
                first = time.perf_counter()
            answer = text
        return answer, first

    return chat_streamly if stream else chat


def openai_operation(client: openai.OpenAI, stream: bool) -> Operation:
    # The same sampling fields as Text2TextLLM sends, so both request bodies are equal.
    params = {k: v for k, v in LLMParameterConfig(max_tokens=MAX_TOKENS).to_dict().items() if k != "stream"}

    def chat(question: str) -> tuple[str, float | None]:
        messages: Any = [{"role": "user", "content": question}]
        response = client.chat.completions.create(model=MODEL, messages=messages, **params)
        return response.choices[0].message.content or "", None

    def chat_streamly(question: str) -> tuple[str, float | None]:
        messages: Any = [{"role": "user", "content": question}]
        parts: list[str] = []
        first = None
        for chunk in client.chat.completions.create(model=MODEL, messages=messages, stream=True, **params):
            content = chunk.choices[0].delta.content if chunk.choices else None
            if content:
                if first is None:
                    first = time.perf_counter()
                parts.append(content)
        return "".join(parts), first

    return chat_streamly if stream else chat


def make_clients(srv: ScriptedServer) -> tuple[Text2TextLLM, openai.OpenAI]:
    llm = Text2TextLLM(base_url=srv.url("/v1/chat/completions"), model_name=MODEL,
                       client_param=ClientParam(use_http=True))
    client = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=OPENAI_RETRIES)
    return llm, client


def operations(llm: Text2TextLLM, client: openai.OpenAI, stream: bool) -> dict[str, Operation]:
    return {"mx_rag": mx_rag_operation(llm, stream), "openai": openai_operation(client, stream)}


def check_same_requests(srv: ScriptedServer, llm: Text2TextLLM, client: openai.OpenAI) -> None:
    """Both clients must send the same JSON body (openai leaves out ``"stream": false``)."""
    for stream in (False, True):
        srv.reset()
        question = next_questions(1)[0]
        for name, operation in operations(llm, client, stream).items():
            check_answer(name, question, operation(question)[0])
        bodies = [dict(request.json) for request in srv.requests]
        for body in bodies:
            body.setdefault("stream", False)
        if len(bodies) != 2 or bodies[0] != bodies[1]:
            raise BenchError(f"the clients sent different requests (stream={stream}): {bodies}")
    srv.reset()


# -- timing ------------------------------------------------------------------------------------


def timed_call(client: str, operation: Operation, question: str) -> Sample:
    start = time.perf_counter()
    answer, first = operation(question)
    end = time.perf_counter()
    check_answer(client, question, answer)
    return Sample(end - start, None if first is None else first - start)


def run_batch(
    client: str, operation: Operation, questions: Sequence[str], pool: ThreadPoolExecutor | None
) -> tuple[list[Sample], float]:
    """Send every question (sequentially, or through the pool); return the samples and wall time."""
    gc.collect()
    start = time.perf_counter()
    if pool is None:
        samples = [timed_call(client, operation, question) for question in questions]
    else:
        samples = list(pool.map(lambda question: timed_call(client, operation, question), questions))
    return samples, time.perf_counter() - start


def run_scenario(
    scenario: Scenario, srv: ScriptedServer, ops: dict[str, Operation], args: argparse.Namespace
) -> dict[str, Tally]:
    pools = {name: ThreadPoolExecutor(scenario.threads, thread_name_prefix=name)
             for name in CLIENTS if scenario.threads > 1}
    try:
        for name in CLIENTS:
            warmup = max(args.warmup, 2 * scenario.threads if scenario.threads > 1 else 0)
            run_batch(name, ops[name], next_questions(warmup), pools.get(name))
        srv.reset()
        tallies = {name: Tally() for name in CLIENTS}
        for round_index in range(args.rounds):
            for name in rotated(CLIENTS, round_index):  # AB, BA, AB, ...
                samples, wall = run_batch(name, ops[name], next_questions(args.requests), pools.get(name))
                tallies[name].samples.extend(samples)
                tallies[name].wall += wall
                srv.reset()  # the server records every request: keep its memory flat
        return tallies
    finally:
        for pool in pools.values():
            pool.shutdown()


# -- statistics and output ---------------------------------------------------------------------


def client_line(scenario: Scenario, client: str, tally: Tally) -> dict[str, Any]:
    latencies = sorted(sample.latency for sample in tally.samples)
    line: dict[str, Any] = {
        "bench": BENCH, "scenario": scenario.name, "client": client, "threads": scenario.threads,
        "requests": len(latencies), "rps": round(len(latencies) / tally.wall, 1),
        "p50_ms": ms(percentile(latencies, 0.50)), "p90_ms": ms(percentile(latencies, 0.90)),
        "p99_ms": ms(percentile(latencies, 0.99)), "mean_ms": ms(sum(latencies) / len(latencies)),
    }
    ttfts = sorted(sample.ttft for sample in tally.samples if sample.ttft is not None)
    if scenario.stream:
        line["ttft_p50_ms"] = ms(percentile(ttfts, 0.50))
        line["ttft_p90_ms"] = ms(percentile(ttfts, 0.90))
    return line


def summary_line(scenario: Scenario, lines: dict[str, dict[str, Any]]) -> dict[str, Any]:
    mx, oa = lines["mx_rag"], lines["openai"]
    line: dict[str, Any] = {
        "bench": BENCH, "scenario": scenario.name,
        "ratio_rps": round(mx["rps"] / oa["rps"], 3),
        "ratio_p50": round(oa["p50_ms"] / mx["p50_ms"], 3),
    }
    if scenario.stream:
        line["ratio_ttft_p50"] = round(oa["ttft_p50_ms"] / mx["ttft_p50_ms"], 3)
    return line


def environment_line(args: argparse.Namespace) -> dict[str, Any]:
    return environment(
        BENCH, implementation=platform.python_implementation(), mxrag=package_version("mxrag"),
        httpx=package_version("httpx"), openai=package_version("openai"), pydantic=package_version("pydantic"),
        langchain_core=package_version("langchain-core"), cpu_count=os.cpu_count(), platform=platform.platform(),
        requests_per_round=args.requests, rounds=args.rounds, threads=args.threads, warmup=args.warmup,
        max_tokens=MAX_TOKENS,
    )


# -- main --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=positive_int, default=200, help="requests per client per round")
    parser.add_argument("--rounds", type=positive_int, default=5, help="alternating rounds per scenario")
    parser.add_argument("--threads", type=positive_int, default=8, help="threads of the concurrent scenario")
    parser.add_argument("--warmup", type=positive_int, default=50, help="untimed requests per client first")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 2 rounds of 20 requests, 5 warm-up (overrides the above)")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.rounds, args.warmup = 20, 2, 5
    return args


def scenarios(threads: int) -> list[Scenario]:
    return [
        Scenario("chat_sequential", stream=False, threads=1),
        Scenario("stream_sequential", stream=True, threads=1),
        Scenario("chat_concurrent", stream=False, threads=threads),
    ]


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    yield environment_line(args)
    with ScriptedServer() as srv:
        llm, client = make_clients(srv)
        try:
            check_same_requests(srv, llm, client)
            for scenario in scenarios(args.threads):
                tallies = run_scenario(scenario, srv, operations(llm, client, scenario.stream), args)
                lines = {name: client_line(scenario, name, tallies[name]) for name in CLIENTS}
                yield from lines.values()
                yield summary_line(scenario, lines)
        finally:
            llm.close()
            client.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        for line in run(args):
            emit(line)
    except BenchError as exc:
        print(f"llm_client benchmark FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
