# SPDX-License-Identifier: Apache-2.0
"""``mxrag eval``: measure a knowledge base the way a team would before changing a setting.

::

    mxrag eval --docs docs/ --kb handbook                       # ingest, write a test set, evaluate
    mxrag eval --kb handbook --setting single3=single:3 --setting hybrid5=hybrid:5 --compare single3,hybrid5

The LLM writes a test set from the knowledge base's own chunks (question, reference answer,
source passage; kept in ``testset.jsonl`` and reused), answers every question with each setting
(``NAME=CHAIN[:K]``, the chains of ``mxrag ask``), and the report gives retrieval recall of the
source passages, EM/F1 against the references and ``RAGEvaluator`` metrics side by side:
``report.json`` and ``report.md`` in ``--out``; the Markdown table is printed. Each answered
question is checkpointed (``report.json.partial.jsonl``), so an interrupted run resumes where it
stopped and a finished one only rewrites its report; ``--restart`` answers everything again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from mx_rag.app.chains import CHAIN_TYPES
from mx_rag.cli.rag import DEFAULT_KB, KbOption
from mx_rag.cli.runtime import Where, answering_session, guard, llm_options

__all__ = ["evaluate_kb", "parse_setting"]

CHECKPOINT_TYPE = "mxrag eval checkpoint"
CHECKPOINT_VERSION = 1


def parse_setting(text: str) -> tuple[str, str, int | None]:
    """``NAME=CHAIN[:K]`` -> (name, chain, k)."""
    from mx_rag.errors import ParameterError

    name, sep, rest = text.partition("=")
    chain, _, k = rest.partition(":")
    if not sep or not name or chain not in CHAIN_TYPES or (k and not (k.isdigit() and 1 <= int(k) <= 100)):
        raise ParameterError(f"--setting must be NAME=CHAIN[:K] with CHAIN one of {list(CHAIN_TYPES)} and K in "
                             f"[1, 100], got {text!r}")
    return name, chain, int(k) if k else None


@llm_options
def evaluate_kb(
    kb: KbOption = DEFAULT_KB,
    docs: Annotated[list[Path] | None, typer.Option(
        "--docs", help="Files or folders to ingest into --kb first (new and changed files only).")] = None,
    setting: Annotated[list[str] | None, typer.Option(
        "--setting", help="NAME=CHAIN[:K], repeatable (default: default=<chain.type>:<chain.k>).")] = None,
    compare: Annotated[str | None, typer.Option(
        "--compare", help="A,B: paired differences of setting A minus setting B.")] = None,
    questions: Annotated[int, typer.Option(
        "--questions", min=1, max=1000,
        help="Test questions to write (the default is a quick check; compare settings on 30 or more).")] = 4,
    testset: Annotated[Path | None, typer.Option(
        "--testset", help="The test set (JSON Lines); written from the knowledge base when missing. "
                          "Default: OUT/testset.jsonl.")] = None,
    metrics: Annotated[str, typer.Option(
        "--metrics", help="RAGEvaluator metrics, comma-separated ('' for none).")] = "faithfulness,answer_relevancy",
    out: Annotated[Path | None, typer.Option("--out", help="Report folder. Default: DATA_DIR/eval/KB.")] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Longest answer, in tokens.")] = 128,
    restart: Annotated[bool, typer.Option("--restart", help="Discard the checkpoint of an earlier run.")] = False,
    *,
    where: Where,
) -> None:
    """Evaluate a knowledge base: a test set from its documents, answers per setting, one report."""
    with guard():  # bad settings are refused before anything starts
        specs = [parse_setting(s) for s in setting or []]
        pair = _check_compare(compare, [name for name, _, _ in specs] or ["default"])
    metric_names = [m.strip() for m in metrics.split(",") if m.strip()]
    marks = [time.perf_counter()]
    with answering_session(where, kb, docs) as (here, llm):
        marks.append(time.perf_counter())
        specs = specs or [("default", here.settings.chain.type, here.settings.chain.k)]
        folder = out or Path(here.settings.data_dir) / "eval" / kb
        run = _Run(here, llm, kb, specs, metric_names, max_tokens)
        items = run.testset(testset or folder / "testset.jsonl", questions)
        marks.append(time.perf_counter())
        records = run.answer_all(items, folder, restart)
        marks.append(time.perf_counter())
        report = run.report(records, items, testset or folder / "testset.jsonl", pair)
        stages = ("ingest_and_llm_start_s", "testset_s", "answers_s")
        report["timings"] = {key: round(end - start, 1)
                             for key, start, end in zip(stages, marks[:-1], marks[1:], strict=True)}
        _write(folder, report)


def _check_compare(compare: str | None, names: list[str]) -> tuple[str, str] | None:
    from mx_rag.errors import ParameterError

    if len(set(names)) != len(names):
        raise ParameterError(f"--setting names must differ, got {names}")
    if compare is None:
        return None
    first, _, second = compare.partition(",")
    if first not in names or second not in names or first == second:
        raise ParameterError(f"--compare must be A,B with two of the settings {names}, got {compare!r}")
    return first, second


def _write(folder: Path, report: dict[str, Any]) -> None:
    from mx_rag.evaluate.report import to_markdown
    from mx_rag.utils.checkpoint import atomic_write_json, atomic_write_text

    markdown = to_markdown(report)
    atomic_write_json(folder / "report.json", report)
    atomic_write_text(folder / "report.md", markdown)
    typer.echo(markdown)
    typer.echo(f"report: {folder / 'report.json'} and {folder / 'report.md'}", err=True)


class _Run:
    """One evaluation: the test set, the answers of every setting, the report."""

    def __init__(self, here: Any, llm: Any, kb: str, specs: list[tuple[str, str, int | None]],
                 metrics: list[str], max_tokens: int) -> None:
        from mx_rag.app.answers import Answerer
        from mx_rag.evaluate.rag_evaluator import RAGEvaluator, check_metrics
        from mx_rag.llm.llm_parameter import LLMParameterConfig

        self.here, self.llm, self.kb, self.specs = here, llm, kb, specs
        self.metrics = check_metrics(metrics) if metrics else []
        self.answerer = Answerer(here.service, llm)
        self.evaluator = RAGEvaluator(llm, here.service.embedding)
        self.config = LLMParameterConfig(max_tokens=max_tokens, temperature=0.0, seed=0)

    def testset(self, path: Path, count: int) -> list[Any]:
        from mx_rag.errors import KnowledgeError
        from mx_rag.evaluate.testset import TestsetGenerator, load_testset, save_testset

        if path.is_file():
            items = load_testset(path)
            typer.echo(f"test set: {len(items)} questions from {path}", err=True)
            return items[:count]
        knowledge = self.here.service.open(self.here.who, self.kb)
        store = knowledge.chunk_store
        chunks = store.search_many(store.get_all_chunk_id()).values()
        passages = [{"text": c.page_content, "source": str(c.metadata.get("source", c.document_name))}
                    for c in chunks if c.metadata.get("type", "text") == "text"]
        typer.echo(f"test set: writing {count} questions from {len(passages)} chunks of {self.kb!r}", err=True)
        items = TestsetGenerator(self.llm).generate(passages, count, show_progress=True)
        if not items:
            raise KnowledgeError(f"the LLM wrote no usable question from the {len(passages)} chunks of {self.kb!r}")
        save_testset(items, path)
        return items

    def answer_all(self, items: list[Any], folder: Path, restart: bool) -> list[dict[str, Any]]:
        from mx_rag.utils.checkpoint import Checkpoint, checkpoint_path
        from mx_rag.utils.progress import Progress

        path = checkpoint_path(folder / "report.json")
        header = {"type": CHECKPOINT_TYPE, "version": CHECKPOINT_VERSION, "settings": self._settings(items)}
        done = {} if restart else _finished(path, header)
        todo = [(spec, item) for spec in self.specs for item in items if f"{spec[0]}/{item.id}" not in done]
        if done:
            typer.echo(f"resuming: {len(done)} answers from {path}, {len(todo)} to go", err=True)
        checkpoint = Checkpoint(path, header, [{"key": k, "record": r} for k, r in done.items()])
        progress = Progress(len(todo), "answers")
        try:
            for spec, item in todo:
                record = self._answer(spec, item)
                done[record["key"]] = record
                checkpoint.write({"key": record["key"], "record": record})
                progress.update()
        finally:
            progress.close()
            checkpoint.close()
        return [done[f"{spec[0]}/{item.id}"] for spec in self.specs for item in items]

    def _settings(self, items: list[Any]) -> dict[str, Any]:
        from mx_rag.utils.checkpoint import digest

        return {"knowledge_base": self.kb, "settings": [list(s) for s in self.specs], "metrics": self.metrics,
                "llm": self.llm.model_name, "max_tokens": self.config.max_tokens,
                "testset": digest([[i.id, i.question, i.reference] for i in items])}

    def _answer(self, spec: tuple[str, str, int | None], item: Any) -> dict[str, Any]:
        from mx_rag.app.answers import Question
        from mx_rag.errors import MxRagError
        from mx_rag.evaluate.report import passage_recall, score_answer

        name, chain_name, k = spec
        record: dict[str, Any] = {"key": f"{name}/{item.id}", "setting": name, "id": item.id,
                                  "question": item.question, "reference": item.reference, "error": None}
        try:
            question = Question(item.question, [])
            started = time.perf_counter()
            result = self.answerer.answer(self.answerer.chain(self.here.who, self.kb, chain_name, question, k),
                                          question, self.config)
            record["seconds"] = time.perf_counter() - started
            answer = str(result.get("result", "")).strip()
            contexts = [str(d.get("page_content", "")) for d in result.get("source_documents") or []]
            record.update(answer=answer, contexts=contexts, recall=passage_recall(item.passages, contexts),
                          **score_answer(answer, item.reference))
            record["metrics"] = self._judge(item, answer, contexts)
        except MxRagError as exc:
            record["error"] = f"{type(exc).__name__}: {exc}"
        return record

    def _judge(self, item: Any, answer: str, contexts: list[str]) -> dict[str, float]:
        if not self.metrics or not answer:
            return {}
        row = {"user_input": [item.question], "response": [answer], "reference": [item.reference],
               "retrieved_contexts": [[c for c in contexts if c] or [" "]]}
        scores = self.evaluator.evaluate(self.metrics, row)
        return {metric: values[0] for metric, values in scores.items()}

    def report(self, records: list[dict[str, Any]], items: list[Any], testset: Path,
               pair: tuple[str, str] | None) -> dict[str, Any]:
        from mx_rag.evaluate.metrics import RESULT_KEY
        from mx_rag.evaluate.report import BASE_COLUMNS, compare, summarize

        names = [name for name, _, _ in self.specs]
        metric_keys = [RESULT_KEY.get(m, m) for m in self.metrics]
        return {"knowledge_base": self.kb, "questions": len(items), "testset": str(testset),
                "llm": self.llm.model_name, "metrics": metric_keys,
                "settings": {name: {"chain": chain, "k": k} for name, chain, k in self.specs},
                "summary": summarize(records, names, metric_keys),
                "comparison": compare(records, *pair, [*BASE_COLUMNS, *metric_keys]) if pair else None,
                "records": records}


def _finished(path: Path, header: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The checkpoint's answered questions when it was written with these settings."""
    import json

    from mx_rag.errors import ParameterError
    from mx_rag.utils.checkpoint import read_lines

    found, entries = read_lines(path)
    if found is None:
        return {}
    if not isinstance(found, dict) or found.get("type") != CHECKPOINT_TYPE or \
            found.get("settings") != json.loads(json.dumps(header["settings"])):
        raise ParameterError(f"{path} holds a run with other settings (or is not an mxrag eval checkpoint); "
                             "pass --restart to discard it, or choose another --out")
    return {e["key"]: e["record"] for e in entries
            if isinstance(e, dict) and isinstance(e.get("record"), dict) and e["record"].get("error") is None}
