# SPDX-License-Identifier: Apache-2.0
"""``mxrag ingest`` runs on the application layer alone: no server package is imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import json, sys
from typer.testing import CliRunner
from mx_rag.cli.main import app
result = CliRunner().invoke(app, sys.argv[1:])
server = sorted(m for m in sys.modules if m.split(".")[0] in ("prometheus_client", "starlette", "fastapi", "uvicorn")
                or m.startswith("mx_rag.server"))
print(json.dumps({"exit": result.exit_code, "output": result.output, "server": server}))
"""


@pytest.mark.slow  # a fresh interpreter loads torch and the embedding model
def test_mxrag_ingest_imports_no_server_module(tmp_path: Path) -> None:
    doc = tmp_path / "note.txt"
    doc.write_text("The boiler is serviced every October by the caretaker.\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-c", SCRIPT, "ingest", str(doc), "--kb", "notes", "--data-dir",
                          str(tmp_path / "data"), "--embedding", "all-MiniLM-L6-v2"],
                         capture_output=True, text=True, check=True, timeout=300)
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["exit"] == 0, seen["output"]
    assert seen["server"] == []
