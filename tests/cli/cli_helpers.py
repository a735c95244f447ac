# SPDX-License-Identifier: Apache-2.0
"""Running ``mxrag`` in the knowledge-base tests: as a subprocess (what a user runs) or through
typer's runner (in process), always in a data folder of the test's own and with no settings
from the environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from mx_rag.cli import main as cli

MXRAG = [sys.executable, "-m", "mx_rag.cli"]
DOCS = Path(__file__).resolve().parents[1] / "data" / "docs"


def clean_env() -> dict[str, str]:
    """The environment without MXRAG_* settings, with the repository importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MXRAG_")}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return env


def mxrag(*args: str, cwd: Path, input: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m mx_rag.cli ARGS`` in ``cwd`` (its ``.mxrag`` is the data folder)."""
    return subprocess.run([*MXRAG, *args], cwd=cwd, env=clean_env(), input=input, capture_output=True, text=True,
                          timeout=timeout, check=False)


def invoke(*args: str, input: str | None = None) -> Any:
    """``mxrag ARGS`` through typer's runner (stdout and stderr apart)."""
    return CliRunner().invoke(cli.app, list(args), input=input)


def copy_docs(folder: Path, *names: str) -> Path:
    """Copies of files from tests/data/docs in ``folder`` (made)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(DOCS / name, folder / name)
    return folder


def one_line_error(stderr: str) -> str:
    """The ``error:`` line of ``stderr``; fails if there is a traceback or more than one error line."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr
    return lines[0]
