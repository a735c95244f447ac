# SPDX-License-Identifier: Apache-2.0
"""``mxrag ingest`` into a graph knowledge base: the time of one run over a few documents, for two
source trees (issue 30: the graph step took the chunks ingestion parsed instead of parsing again).

Each round makes a fresh data folder, ``mxrag kb create g --graph``, then times ``mxrag ingest
FILES --kb g`` (a child process with ``PYTHONPATH`` on the tree, so start-up is in the figure for
both). Contenders take turns (A B, then B A) so that the machine's load falls on both alike.

    flock /tmp/mxrag-bench.lock python bench/graph_ingest.py --before /tmp/mx_rag-before --rounds 3 \\
        | tee -a bench/results/graph_ingest.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import emit, environment, loadavg, positive_int, rotating_rounds

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["norwich-city.txt", "codeblock.md", "simple-table.md", "fake.docx", "layout-parser-paper-fast.pdf",
        "example-10k-1p.html"]


def _mxrag(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-m", "mx_rag.cli", *args], env=env, capture_output=True, text=True,
                          check=False)


def one_run(tree: Path, files: list[str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="mxrag-graph-ingest-") as data:
        made = _mxrag(tree, "kb", "create", "g", "--graph", "--data-dir", data)
        if made.returncode:
            raise SystemExit(f"kb create failed with {tree}: {made.stderr}")
        start = time.perf_counter()
        run = _mxrag(tree, "ingest", *files, "--kb", "g", "--data-dir", data, "--json")
        seconds = time.perf_counter() - start
        if run.returncode not in (0, 1):
            raise SystemExit(f"ingest failed with {tree}: {run.stderr}")
        outcome = json.loads(run.stdout)
        return {"seconds": round(seconds, 3), "chunks": outcome["chunks"], "graph_nodes": outcome["graph_nodes"],
                "added": len(outcome["added"]), "failed": len(outcome["failed"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the source tree before the change")
    parser.add_argument("--rounds", type=positive_int, default=3)
    args = parser.parse_args()
    files = [str(ROOT / "tests" / "data" / "docs" / name) for name in DOCS]
    emit(environment("graph_ingest", files=len(files)))
    for turn, (name, tree) in rotating_rounds([("before", args.before), ("after", ROOT)], args.rounds):
        emit({"bench": "graph_ingest", "contender": name, "round": turn, **one_run(tree, files),
              "loadavg": loadavg()})


if __name__ == "__main__":
    main()
