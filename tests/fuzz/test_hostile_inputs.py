"""Hostile inputs refused, or read harmlessly, within a memory cap.

The cases (``hostile_cases.py``) run in one ``hostile_runner.py`` process, started in the
background as soon as these tests are collected (conftest.py), which builds the files and then
forks a child per case under ``RLIMIT_AS`` = 1.5 GiB; the child's peak RSS comes from ``wait4``.
A case passes when its outcome is the expected one (our error naming the problem, or documents
without the attack's effect), the cap was never hit (no ``MemoryError`` or ``RecursionError``
behind the error, no kill) and nothing leaked. ``MXRAG_HOSTILE_REPORT=path.json`` writes every
case's outcome and peak RSS to that file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from fuzz_helpers import HOSTILE_RUN
from hostile_cases import CAP_MIB, CASES


@pytest.fixture(scope="module")
def results(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    run = request.config.stash[HOSTILE_RUN]  # started by conftest.py when the tests were collected
    code = run.process.wait(timeout=1200)
    assert code == 0, (run.directory / "stderr.txt").read_text(encoding="utf-8")[-3000:]
    found = {result["name"]: result for result in json.loads((run.directory / "results.json").read_text())}
    report = os.environ.get("MXRAG_HOSTILE_REPORT")
    if report:
        Path(report).write_text(json.dumps(list(found.values()), indent=1), encoding="utf-8")
    return found


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input_is_refused_within_the_memory_cap(results: dict[str, dict[str, Any]], name: str) -> None:
    case, result = CASES[name], results[name]
    assert result["outcome"] in case.outcomes, result
    assert result.get("cause") not in ("MemoryError", "RecursionError"), result
    assert "signal" not in result, result
    assert result["peak_rss_mib"] < CAP_MIB, result
    assert not result.get("leaked"), result
    if result["outcome"] in ("refused", "value_error"):
        assert "\n" not in result["message"], result
        if case.match:
            assert re.search(case.match, result["message"]), result
    if "max_chars" in case.extra and result["outcome"] == "documents":
        assert result["chars"] <= case.extra["max_chars"], result  # no entity was expanded

