# SPDX-License-Identifier: Apache-2.0
"""What the scripts of bench/ share, so that each one holds only what it measures.

* the environment line (``environment``, ``package_version``, ``utc_now``, ``loadavg``, ``memory_mb``);
* JSON lines on stdout (``emit``);
* rounds in rotating order (``rotated``, ``rotating_rounds``): contender A B C, then B C A, then
  C A B, so that drift and the load of other jobs fall on every contender alike;
* figures (``percentile``, numpy's default interpolation; ``ms``) and timing (``timed``, ``Stopwatch``);
* thread pinning (``pin_torch_threads``, ``worker_env`` for child processes);
* ``positive_int`` for argparse;
* the multihop data of /work/shared/data/multihop (``Question``, ``load_questions``, ``load_corpus``)
  and the corpus-vector cache (``cached_vectors``).

A script run as ``python bench/<name>.py`` has bench/ first on ``sys.path``: ``from _harness import ...``.
The key names of each script's lines stay that script's own (docs/benchmarks.md quotes them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import numpy as np

    from mx_rag.storage.document_store import MxDocument

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent  # the repository
MULTIHOP = Path("/work/shared/data/multihop")  # HotpotQA and MuSiQue questions and corpora
QUESTIONS_FILE = "hotpotqa_train.json"  # 100 HotpotQA (train) questions
CORPUS_FILE = "hotpotqa_train_corpus.json"  # their 994 paragraphs: title -> sentences
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mxrag" / "bench"
WARMUP_QUESTION = "Which river flows through the capital of the country that hosted the 1936 Olympics?"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


# -- the environment line ----------------------------------------------------------------------


def package_version(name: str, missing: str | None = "not installed") -> str | None:
    """The installed version of distribution ``name``, else ``missing``."""
    try:
        return version(name)
    except PackageNotFoundError:
        return missing


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded."""
    return [round(x, 2) for x in os.getloadavg()]


def loadavg_1m() -> float:
    return round(os.getloadavg()[0], 2)


def memory_mb() -> dict[str, float]:
    """Resident memory now and at peak (VmRSS, VmHWM), in MiB."""
    found: dict[str, float] = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found["rss_mb" if key == "VmRSS" else "peak_rss_mb"] = round(int(value.split()[0]) / 1024, 1)
    return found


def environment(bench: str | None, kind: str | None = "scenario", date: str = "date", **fields: Any) -> dict[str, Any]:
    """A run's first line: ``{"bench": bench, kind: "environment", date: now, "python": ..., **fields}``.

    ``kind`` and ``date`` name the keys as the script always has (``scenario``/``kind``/``method``/
    ``record``; ``date``/``when``); ``bench`` or ``kind`` None leaves that key out.
    """
    line: dict[str, Any] = {} if bench is None else {"bench": bench}
    if kind is not None:
        line[kind] = "environment"
    line[date] = utc_now()
    line["python"] = platform.python_version()
    line.update(fields)
    return line


def emit(line: dict[str, Any]) -> None:
    """One JSON line on stdout, flushed at once (non-ASCII text written as is)."""
    print(json.dumps(line, ensure_ascii=False), flush=True)


# -- rounds, figures, timing -------------------------------------------------------------------


def rotated(items: Sequence[T], turn: int) -> list[T]:
    """``items`` rotated left by ``turn``: ABC, BCA, CAB, ABC, ... for turns 0, 1, 2, 3, ..."""
    shift = turn % len(items)
    return [*items[shift:], *items[:shift]]


def rotating_rounds(items: Sequence[T], rounds: int) -> Iterator[tuple[int, T]]:
    """``(round, item)`` for ``rounds`` rounds over every item, the order rotated each round."""
    for turn in range(rounds):
        for item in rotated(items, turn):
            yield turn, item


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def recall_against(exact: Sequence[tuple[list[float], list[int]]],
                   found: Sequence[tuple[list[float], list[int]]]) -> dict[str, float]:
    """Recall of ``found`` against ``exact`` hits, each ``(scores, ids)`` per question, best first
    and higher better: by ids, and tie-aware (a hit counts when it scores at least the exact
    last one: vectors that tie make recall by ids understate a search)."""
    by_id = tie_aware = total = 0
    for (truth_scores, truth), (scores, ids) in zip(exact, found, strict=True):
        by_id += len(set(truth) & set(ids))
        tie_aware += sum(score >= truth_scores[-1] - 1e-6 for score in scores)
        total += len(truth)
    return {"recall": round(by_id / max(total, 1), 4), "tie_aware_recall": round(tie_aware / max(total, 1), 4)}


def ms(seconds: float, digits: int = 3) -> float:
    return round(seconds * 1000, digits)


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """The seconds ``fn()`` took (``perf_counter``), and what it returned."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


class Stopwatch:
    """Wall and process CPU seconds of a ``with`` block: ``watch.seconds``, ``watch.cpu_s`` after it."""

    def __enter__(self) -> Stopwatch:
        self.start, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds, self.cpu_s = time.perf_counter() - self.start, time.process_time() - self._cpu


# -- threads and arguments ---------------------------------------------------------------------


def pin_torch_threads(threads: int) -> int:
    """torch's intra-op threads of this process; returns what torch then reports."""
    import torch

    torch.set_num_threads(threads)
    return int(torch.get_num_threads())


def worker_env(threads: int, variables: Sequence[str] = THREAD_VARIABLES) -> dict[str, str]:
    """This process's environment for a child: ``variables`` (OpenMP, BLAS) set to ``threads``,
    the Hugging Face libraries offline."""
    return {**os.environ, **dict.fromkeys(variables, str(threads)), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


# -- the multihop data -------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    text: str
    gold: frozenset[str]  # supporting titles


def load_questions(data_dir: Path, count: int) -> list[Question]:
    """The first ``count`` HotpotQA questions of ``data_dir``, with their supporting titles."""
    records = json.loads((data_dir / QUESTIONS_FILE).read_text(encoding="utf-8"))[:count]
    return [Question(r["question"], frozenset(title for title, _ in r["supporting_facts"])) for r in records]


def load_corpus(data_dir: Path, content: str) -> list[MxDocument]:
    """One chunk per HotpotQA paragraph: ``"<title>: <paragraph>"`` (``content="title_text"``) or the
    paragraph alone; the title in metadata ``title``."""
    from mx_rag.storage.document_store import MxDocument

    corpus: dict[str, list[str]] = json.loads((data_dir / CORPUS_FILE).read_text(encoding="utf-8"))
    docs = []
    for title, sentences in corpus.items():
        paragraph = "".join(sentences).strip()  # the sentences carry their leading spaces
        text = f"{title}: {paragraph}" if content == "title_text" else paragraph
        docs.append(MxDocument(page_content=text, metadata={"title": title}, document_name=title))
    return docs


def cached_vectors(embed: Callable[[list[str]], Any], model: str, texts: list[str], cache_dir: Path | None,
                   prefix: str) -> tuple[np.ndarray, float | None]:
    """The texts' vectors and the seconds ``embed`` took; None seconds: read from ``cache_dir``
    (``<prefix>-<digest of model and texts>.npy``), where an earlier run left them."""
    import numpy as np

    digest = hashlib.sha256(json.dumps([model, texts]).encode()).hexdigest()[:16]
    path = cache_dir / f"{prefix}-{digest}.npy" if cache_dir is not None else None
    if path is not None and path.is_file():
        return np.load(path), None
    start = time.perf_counter()
    vectors = np.asarray(embed(texts), dtype=np.float32)
    seconds = time.perf_counter() - start
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
    return vectors, seconds
