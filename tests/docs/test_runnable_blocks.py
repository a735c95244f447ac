# SPDX-License-Identifier: Apache-2.0
"""Every code block the docs mark runnable (info string ``bash runnable`` or ``python runnable``,
in README.md and docs/*.md) is run as a reader would run it, and must succeed.

Each block runs in a fresh folder that holds what the reader's checkout holds at its root (``docs``
and ``.venv``, linked), with ``.venv/bin`` first on PATH, so ``mxrag ...`` and ``.venv/bin/mxrag``
both work and nothing is written into the repository. Commands that start the embedded LLM get
the suite's small model (tests/conftest.py sets ``MXRAG_LLM_MODEL``). stdin is closed, so an
interactive command (``mxrag chat``) ends at once, as on Ctrl-D.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w+) runnable[^\n]*\n(.*?)^```", re.M | re.S)
TIMEOUT = 600.0  # a block that ingests and asks, on a busy two-core machine
LEFT_OUT = ("benchmarks.md", "differences.md")
MIN_BLOCKS = 2  # the guide's command-line and Python blocks at least: markers must not vanish unseen


def runnable_blocks() -> list[tuple[str, str, str]]:
    """(page:line, language, code) of every runnable block."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1), match.group(2)))
    return found


BLOCKS = runnable_blocks()


def test_the_docs_keep_their_runnable_blocks() -> None:
    assert len(BLOCKS) >= MIN_BLOCKS, [where for where, _, _ in BLOCKS]
    assert all(language in ("bash", "python") for _, language, _ in BLOCKS), BLOCKS


@pytest.mark.slow
@pytest.mark.parametrize(("where", "language", "code"), BLOCKS, ids=[where for where, _, _ in BLOCKS])
def test_runnable_block(where: str, language: str, code: str, tmp_path: Path) -> None:
    (tmp_path / ".venv").symlink_to(ROOT / ".venv", target_is_directory=True)
    # a copy of the user docs; the benchmark log and the differences table (70 % of the text) are
    # left out, which halves the time of the suite's slowest test
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=lambda _, names: [n for n in names if n in LEFT_OUT])
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    command = ["bash", "-euo", "pipefail", "-c", code] if language == "bash" else [sys.executable, "-c", code]
    done = subprocess.run(command, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert done.returncode == 0, f"{where} exited with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"{where} printed nothing"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
