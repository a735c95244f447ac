# SPDX-License-Identifier: Apache-2.0
"""``mxrag ingest`` at work: find the files, check each, ingest the rest with progress, prune,
extend the graph, sum up.

Each batch of files is committed as it is stored (at most ``BATCH_CHUNKS`` chunks; a larger file
alone), so the first Ctrl-C stops after the current batch and keeps everything stored so far; a
second Ctrl-C stops at once (the batch in flight is rolled back). Either way the command says what
was kept and exits with 130.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mx_rag.cli.common import stop_on_signals
from mx_rag.cli.files import FailureMemo, Found, find_files, shown_path, white_paths
from mx_rag.cli.progress import Reporter

if TYPE_CHECKING:
    from mx_rag.cli.runtime import Opened

__all__ = ["Outcome", "ingest_paths"]

BATCH_CHUNKS = 32  # chunks per commit: small files share one, a larger file is committed alone
MEMO_FILE = "ingest-failures.json"
SHOWN = {"added": "added", "replaced": "updated", "unchanged": "unchanged", "failed": "failed", "skipped": "skipped"}


@dataclass
class Outcome:
    """What one ``mxrag ingest`` did, by the paths the user sees."""

    knowledge_base: str
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    not_done: list[str] = field(default_factory=list)
    chunks: int = 0
    ocr_pages: int = 0  # pages and images read by OCR
    signal: int | None = None  # the signal that stopped the run
    aborted: bool = False  # stopped by a second Ctrl-C, the batch in flight rolled back
    graph_nodes: int | None = None
    pruned_paths: set[str] = field(default_factory=set)  # missing named paths whose documents were removed

    def as_dict(self) -> dict[str, Any]:
        return {"knowledge_base": self.knowledge_base, "added": self.added, "updated": self.updated,
                "unchanged": self.unchanged, "failed": self.failed, "skipped": self.skipped, "removed": self.removed,
                "not_done": self.not_done, "chunks": self.chunks, "interrupted": self.signal is not None,
                "graph_nodes": self.graph_nodes, "ocr_pages": self.ocr_pages}

    @property
    def exit_code(self) -> int:
        if self.signal is not None:
            return 128 + self.signal
        return 1 if self.failed else 0

    def summary(self, seconds: float) -> str:
        counts = [(len(self.added), "added"), (len(self.updated), "updated"), (len(self.unchanged), "unchanged"),
                  (len(self.failed), "failed"), (len(self.skipped), "skipped"), (len(self.removed), "removed")]
        parts = ", ".join(f"{n} {word}" for n, word in counts if n or word not in ("skipped", "removed"))
        if self.ocr_pages:
            parts += f", {self.ocr_pages} page{'s' * (self.ocr_pages != 1)} read by OCR"
        per_second = self.chunks / seconds if seconds > 0 else 0.0
        rate = f", {per_second:.{0 if per_second >= 10 else 1}f} chunks/s" if self.chunks and seconds > 0 else ""
        return (f"knowledge base {self.knowledge_base!r}: {parts} ({self.chunks} chunk{'s' * (self.chunks != 1)} "
                f"in {seconds:.1f} s{rate})")

    def kept(self) -> str:
        kept = len(self.added) + len(self.updated)
        how = ("stopped at once: the batch being stored was rolled back" if self.aborted
               else "stopped after the files being stored")
        return (f"interrupted ({how}): kept {kept} file(s) stored in this run, {len(self.unchanged)} unchanged; "
                f"{len(self.not_done)} not ingested: run the same command again to continue")


def ingest_paths(opened: Opened, name: str, paths: list[Path], report: Reporter, *, prune: bool = False,
                 retry_failed: bool = False, ray: str | None = None) -> Outcome:
    """Ingest ``paths`` into knowledge base ``name`` (made if missing), reporting each file; on the
    Ray cluster at ``ray`` when given (``mx_rag.app.scale_out``)."""
    service, who = opened.service, opened.who
    outcome = Outcome(name)
    found = find_files(paths, {s.lower() for s in service.loader.loaders})
    if name not in service.names(who):
        from mx_rag.app.service import check_kb_name

        if not check_kb_name(name) or not found.files:  # nothing to put in it: no empty knowledge base
            outcome.failed.update(found.failed)
            outcome.skipped.update(found.skipped)
            report.start(len(outcome.failed))
            for shown, reason in outcome.failed.items():
                report.file("failed", shown, reason=reason)
            return outcome
        service.create(who, name)
        report.note(f"created knowledge base {name!r}")
    memo = FailureMemo(opened.settings.data_dir / MEMO_FILE, f"{who.user_id}/{name}")
    todo = _checked(found, memo, retry_failed, outcome)
    report.start(len(todo) + len(outcome.failed))
    deferred = set(found.missing) if prune else set()  # a failure only if --prune finds nothing to remove
    for shown, reason in outcome.failed.items():
        if shown not in deferred:
            report.file("failed", shown, reason=reason)
    for shown, reason in found.skipped.items():
        outcome.skipped[shown] = reason
        report.file("skipped", shown, reason=reason)
    try:
        _ingest(opened, name, found, todo, memo, report, outcome, ray)
    finally:
        memo.save()
    if outcome.signal is None:
        if prune:
            _prune(opened, name, found, report, outcome)
        if service.is_graph(who, name):
            outcome.graph_nodes = int(service.graph(who, name).graph.count_nodes())
    for shown in outcome.pruned_paths:  # with --prune, a missing path whose documents were removed is no failure
        outcome.failed.pop(shown, None)
    for shown in sorted(deferred - outcome.pruned_paths):
        report.file("failed", shown, reason=outcome.failed[shown])
    return outcome


def ingest_first(opened: Opened, name: str, docs: list[Path]) -> None:
    """Ingest ``docs`` into ``name`` with a progress bar before a command that reads the knowledge
    base (``ask --docs``, ``eval --docs``); an interrupted ingest ends the command with its exit code."""
    import typer

    from mx_rag.cli.progress import reporter

    report = reporter()
    try:
        outcome = ingest_paths(opened, name, list(docs), report)
    finally:
        report.close()
    report.echo(outcome.summary(report.elapsed))
    if outcome.signal is not None:
        report.echo(outcome.kept())
        raise typer.Exit(outcome.exit_code)


def _checked(found: Found, memo: FailureMemo, retry_failed: bool, outcome: Outcome) -> list[Path]:
    """The files to ingest; the others failed with their reason (too big, unreadable, failed before)."""
    from mx_rag.utils.common import MAX_FILE_SIZE

    outcome.failed.update(found.failed)
    todo = []
    for path in found.files:
        shown = found.shown[str(path)]
        try:
            size = path.stat().st_size
        except OSError as exc:  # gone or unreadable since the walk
            outcome.failed[shown] = exc.strerror or str(exc)
            continue
        if size > MAX_FILE_SIZE:
            outcome.failed[shown] = f"{size} bytes, over the limit of {MAX_FILE_SIZE // (1 << 20)} MiB"
        elif size == 0:
            outcome.failed[shown] = "empty file"
        elif not _readable(path):
            outcome.failed[shown] = "cannot be read (permission denied)"
        elif not retry_failed and (before := memo.known(path)) is not None:
            outcome.failed[shown] = f"{before} (unchanged since it failed; --retry-failed parses it again)"
        else:
            todo.append(path)
    return todo


def _readable(path: Path) -> bool:
    try:
        with path.open("rb"):
            return True
    except OSError:
        return False


def _ingest(opened: Opened, name: str, found: Found, todo: list[Path], memo: FailureMemo, report: Reporter,
            outcome: Outcome, ray: str | None = None) -> None:
    """Ingest ``todo`` through the service's one entry point (a graph knowledge base's graph is
    extended with the same chunks at the end)."""
    from mx_rag.knowledge.ingest import FileEvent

    if not todo:
        return
    service, who = opened.service, opened.who

    def on_event(event: FileEvent) -> None:
        shown = found.shown.get(event.path, event.path)
        status = SHOWN[event.status]
        if status == "failed":
            reason = _reason(event.path, event.reason)
            outcome.failed[shown] = reason
            memo.record(Path(event.path), reason)
        elif status == "skipped":
            outcome.skipped[shown] = _reason(event.path, event.reason)
        else:
            getattr(outcome, status).append(shown)
            outcome.chunks += event.chunks
            outcome.ocr_pages += event.ocr_pages
            memo.forget([event.path])
        reason = outcome.failed.get(shown, "") if status == "failed" else outcome.skipped.get(shown, "")
        report.file(status, shown, event.chunks, reason if status in ("failed", "skipped") else "")

    def first_stop() -> None:
        report.note("stopping after the files being stored (Ctrl-C again to stop at once)")

    def on_graph(documents: int) -> None:
        report.note(f"building the graph of {documents} new or changed document(s)…")

    if ray is not None:  # Ctrl-C ends the run; what was committed stays, a rerun does the rest
        from mx_rag.app.scale_out import ingest_on_ray

        ingest_on_ray(service, who, name, todo, address=ray, white_paths=white_paths(todo), progress=on_event)
        return
    with stop_on_signals(first_stop, second_interrupts=True) as stop:
        try:
            result = service.ingest(who, name, todo, progress=on_event, stop=stop, white_paths=white_paths(todo),
                                    batch_chunks=BATCH_CHUNKS, on_graph=on_graph)
        except KeyboardInterrupt:
            handled = set(outcome.added + outcome.updated + outcome.unchanged) | set(outcome.failed)
            outcome.not_done = [found.shown[str(p)] for p in todo if found.shown[str(p)] not in handled]
            outcome.signal, outcome.aborted = signal.SIGINT, True
            return
    if result.not_done or stop.is_set():
        outcome.not_done = [found.shown.get(p, p) for p in result.not_done]
        outcome.signal = getattr(stop, "signum", signal.SIGINT)


def _prune(opened: Opened, name: str, found: Found, report: Reporter, outcome: Outcome) -> None:
    """Remove the documents under the named paths whose files were not found there."""
    roots = found.roots + list(found.missing.values())
    for path in opened.service.prune(opened.who, name, roots, sorted(found.present)):
        outcome.removed.append(shown_path(path))
        report.file("removed", shown_path(path), reason="its file is gone")
        for shown, missing in found.missing.items():
            if Path(path) == missing or Path(path).is_relative_to(missing):
                outcome.pruned_paths.add(shown)


def _reason(path: str, text: str) -> str:
    """A loader's message without the file name or path it starts with (the line shows it)."""
    for prefix in (f"{Path(path).name}: ", f"{path!r} ", f"'{path}' ", f"{path}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text
