# SPDX-License-Identifier: Apache-2.0
"""The evaluator's checkpoint: ``<save_file>.partial.jsonl``, one finished question per line.

Its first line (the header) pins the settings that change results; each finished question is
known by its key (the record's id, else ``#<index>``) and checked against the eval file's record
(the same question and accepted answers), so a checkpoint or a finished report of the first 10
questions serves a run over the first 20. ``read_checkpoint`` refuses a checkpoint of other
settings or of another file (none of its questions in this one); ``read_report`` reuses a report
only when its summary's ``settings`` are these. Also the atomic JSON write of the report.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from mx_rag.corag.datasets import parse_item
from mx_rag.errors import ParameterError
from mx_rag.utils.checkpoint import CHECKPOINT_SUFFIX, Checkpoint, atomic_write_json, checkpoint_path, digest

__all__ = [
    "CHECKPOINT_SUFFIX",
    "CHECKPOINT_TYPE",
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "atomic_write_json",
    "checkpoint_path",
    "digest",
    "question_keys",
    "read_checkpoint",
    "read_report",
    "retryable",
]

logger = logging.getLogger("mx_rag.corag.evaluator")

CHECKPOINT_TYPE = "CoRagEvaluator checkpoint"
CHECKPOINT_VERSION = 1


def question_keys(records: list[Any]) -> list[str]:
    """One key per record: its id (``id``/``_id``/...), or ``#<index>`` without one or for a repeated id."""
    ids: list[str] = []
    for index, raw in enumerate(records):
        try:
            ids.append(parse_item(raw, index).id)
        except ParameterError:
            ids.append("")
    return _unique_keys(ids)


def _unique_keys(ids: list[str]) -> list[str]:
    keys: list[str] = []
    seen: set[str] = set()
    for index, key in enumerate(ids):
        if not key or key in seen or key.startswith("#"):
            key = f"#{index}"
        seen.add(key)
        keys.append(key)
    return keys


def _same_question(raw: Any, index: int, record: dict[str, Any]) -> bool:
    """Whether the finished ``record`` answers the eval file's ``raw``: same question, same accepted answers."""
    try:
        item = parse_item(raw, index)
    except ParameterError:
        return record.get("question") is None
    return bool(record.get("question") == item.question and record.get("ground_truths") == item.answers)


def _matching(finished: dict[str, dict[str, Any]], records: list[Any], keys: list[str]) -> dict[int, dict[str, Any]]:
    """The finished records of this eval file's questions, by index."""
    return {index: finished[key] for index, key in enumerate(keys)
            if key in finished and _same_question(records[index], index, finished[key])}


def retryable(record: dict[str, Any]) -> bool:
    """A valid question whose run failed (an invalid record fails the same way every time)."""
    return record.get("question") is not None and (record.get("error") is not None
                                                    or record.get("naive_error") is not None)


def read_checkpoint(path: Path, header: dict[str, Any], records: list[Any],
                    keys: list[str]) -> dict[int, dict[str, Any]]:
    """The checkpoint's finished records of this eval file's questions, by index; {} without one.

    Raises:
        ParameterError: the file is not a checkpoint, or it was written with other settings or
            for another eval file (none of its questions is in this one).
    """
    if not path.is_file():
        return {}
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines or not lines[0].strip():  # stopped before its header was written
        return {}
    advice = "pass restart=True (mxrag corag evaluate --restart) to discard it, or choose another save_file"
    try:
        found = json.loads(lines[0])
    except ValueError:
        found = None
    if not isinstance(found, dict) or found.get("type") != CHECKPOINT_TYPE:
        raise ParameterError(f"{path} is not a CoRagEvaluator checkpoint; {advice}")
    if found.get("version") != CHECKPOINT_VERSION:
        raise ParameterError(f"checkpoint {path} has format version {found.get('version')!r}, this version "
                             f"reads {CHECKPOINT_VERSION}; {advice}")
    then, now = found.get("settings") or {}, json.loads(json.dumps(header["settings"]))
    changed = [f"{name} {then.get(name)!r} then, {now.get(name)!r} now"
               for name in sorted(set(then) | set(now)) if then.get(name) != now.get(name)]
    if changed:
        raise ParameterError(f"checkpoint {path} was written with other settings ({'; '.join(changed)}); {advice}")
    finished: dict[str, dict[str, Any]] = {}
    broken = 0
    for line in lines[1:]:
        try:
            entry = json.loads(line)
        except ValueError:
            broken += bool(line.strip())
            continue
        if isinstance(entry, dict) and isinstance(entry.get("key"), str) and isinstance(entry.get("record"), dict):
            finished[entry["key"]] = entry["record"]  # a later line (a retried question) wins
        else:
            broken += 1
    if broken:
        logger.warning("%s: ignoring %d broken line(s)", path, broken)
    done = _matching(finished, records, keys)
    if finished and not done:
        raise ParameterError(
            f"checkpoint {path} belongs to another eval file ({found.get('eval_file')!r}, "
            f"{found.get('questions')} questions): none of its {len(finished)} finished questions is in "
            f"{header['eval_file']!r} ({header['questions']} questions); {advice}")
    return done


def read_report(path: Path, settings: dict[str, Any], records: list[Any], keys: list[str]) -> dict[int, dict[str, Any]]:
    """The finished records of this eval file's questions in the report at ``path``, by index.

    {} when there is no report there, or it is not one, or its summary was written with other
    ``settings`` (then the new report replaces it, as a new evaluation would).
    """
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not (isinstance(report, list) and report and isinstance(report[0], dict)
            and report[0].get("settings") == json.loads(json.dumps(settings))):
        return {}
    rows = [row for row in report[1:] if isinstance(row, dict)]
    done = _matching(dict(zip(_unique_keys([str(row.get("id") or "") for row in rows]), rows, strict=True)),
                     records, keys)
    if done and len(done) < len(rows):
        logger.warning("%s: %d of its %d questions are not in this eval file; the new report leaves them out",
                       path, len(rows) - len(done), len(rows))
    return done
