# SPDX-License-Identifier: Apache-2.0
"""``mxrag ingest --ray`` refuses what cannot scale out, in one line, before any cluster is reached."""

from __future__ import annotations

from pathlib import Path

import pytest

from mx_rag.distributed import RayOptions
from mx_rag.errors import ParameterError
from tests.cli.cli_helpers import invoke, one_line_error


def test_a_faiss_and_sqlite_knowledge_base_is_refused_with_one_line(tmp_path: Path) -> None:
    doc = tmp_path / "docs" / "a.md"
    doc.parent.mkdir()
    doc.write_text("# A\n\nGranite is an igneous rock.\n", encoding="utf-8")
    result = invoke("ingest", str(doc), "--kb", "local", "--ray", "auto", "--data-dir", str(tmp_path / "data"))
    assert result.exit_code == 1
    line = one_line_error(result.stderr)
    assert "--ray needs stores every node can reach" in line and "SQLite" in line and "MindFAISS" in line
    assert "without --ray" in line


def test_ray_options_name_the_bad_value() -> None:
    with pytest.raises(ParameterError, match="writers"):
        RayOptions(writers=0)


def test_the_package_imports_no_ray_until_it_runs() -> None:
    import subprocess
    import sys

    code = "import sys, mx_rag.distributed as d; d.RayOptions; d.chunk_id; print('ray' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
