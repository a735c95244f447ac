# SPDX-License-Identifier: Apache-2.0
"""``mxrag kb create|list|show|delete`` on a data folder (no model is loaded), usage errors (exit
code 2), one-line errors (exit code 1), and ``--help`` of every knowledge-base command and option."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from mx_rag.cli import main as cli
from tests.cli.cli_helpers import clean_env, invoke, one_line_error

COMMANDS = [("ingest",), ("ask",), ("chat",), ("search",), ("kb", "create"), ("kb", "list"), ("kb", "show"),
            ("kb", "delete"), ("kb", "repair"), ("graph", "build"), ("graph", "show")]


def _command(path: tuple[str, ...]) -> Any:
    command: Any = typer.main.get_command(cli.app)
    for name in path:
        command = command.commands[name]
    return command


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_and_option_has_help(path: tuple[str, ...]) -> None:
    result = invoke(*path, "--help")
    assert result.exit_code == 0, result.output
    assert "``" not in result.stdout  # no raw reStructuredText
    for param in _command(path).params:
        if param.param_type_name == "option" and param.name != "help":
            assert param.help, f"mxrag {' '.join(path)} {param.opts[0]} has no help"
        if param.param_type_name == "argument":
            assert getattr(param, "help", None), f"mxrag {' '.join(path)} {param.name} has no help"


def test_the_root_help_lists_the_commands() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for name in ("ingest", "ask", "chat", "search", "kb", "graph", "serve", "mcp", "keys", "config", "llm"):
        assert name in result.stdout
    assert "--debug" in result.stdout


def test_create_list_show_delete(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    created = invoke("kb", "create", "handbook", *data)
    assert created.exit_code == 0 and created.stdout == "created knowledge base 'handbook'\n"
    assert invoke("kb", "create", "notes", "--graph", *data).exit_code == 0
    again = invoke("kb", "create", "handbook", *data)
    assert again.exit_code == 1 and "already exists" in one_line_error(again.stderr)
    listed = invoke("kb", "list", "--json", *data)
    assert json.loads(listed.stdout) == [
        {"name": "handbook", "documents": 0, "chunks": 0, "graph": False},
        {"name": "notes", "documents": 0, "chunks": 0, "graph": True},
    ]
    plain = invoke("kb", "list", *data).stdout
    assert plain == "handbook\t0 documents\t0 chunks\nnotes\t0 documents\t0 chunks\tgraph\n"
    shown = invoke("kb", "show", "notes", *data)
    assert shown.exit_code == 0 and shown.stdout.startswith("notes: 0 documents, 0 chunks, graph of 0 entities")
    refused = invoke("kb", "delete", "handbook", *data)  # stdin is no terminal: --yes is needed
    assert refused.exit_code == 2 and "needs --yes" in refused.stderr
    deleted = invoke("kb", "delete", "handbook", "--yes", *data)
    assert deleted.exit_code == 0 and deleted.stdout == "deleted knowledge base 'handbook' (0 documents)\n"
    assert [row["name"] for row in json.loads(invoke("kb", "list", "--json", *data).stdout)] == ["notes"]


def test_unknown_names_and_bad_input(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    missing = invoke("kb", "show", "nope", *data)
    assert missing.exit_code == 1
    assert one_line_error(missing.stderr).startswith("error: no knowledge base 'nope' in ")
    bad = invoke("kb", "create", "no/slash", *data)
    assert bad.exit_code == 1 and "must be 1 to 64 characters" in one_line_error(bad.stderr)
    assert invoke("kb", "show", *data).exit_code == 2  # the name is missing
    assert invoke("kb", "list", "--bogus", *data).exit_code == 2
    config = invoke("kb", "list", "--config", str(tmp_path / "absent.toml"), *data)
    assert config.exit_code == 1 and "does not exist" in one_line_error(config.stderr)
    broken = tmp_path / "broken.toml"
    broken.write_text("[chain]\nk = 0\n", encoding="utf-8")
    invalid = invoke("kb", "list", "--config", str(broken), *data)
    assert invalid.exit_code == 1 and "k" in one_line_error(invalid.stderr)


def test_no_help_text_shows_raw_markup() -> None:
    pending = [(typer.main.get_command(cli.app), "mxrag")]
    while pending:
        command, path = pending.pop()
        texts = [command.help or ""] + [getattr(param, "help", None) or "" for param in command.params]
        assert not [text for text in texts if "``" in text], path
        pending += [(sub, f"{path} {name}") for name, sub in getattr(command, "commands", {}).items()]


def test_a_setting_out_of_range_names_the_setting_and_the_range(tmp_path: Path, monkeypatch: Any) -> None:
    overlap = tmp_path / "overlap.toml"
    overlap.write_text("[upload]\nchunk_size = 100\nchunk_overlap = 800\n", encoding="utf-8")
    shown = invoke("config", "show", "--config", str(overlap))
    assert shown.exit_code == 1
    assert one_line_error(shown.stderr) == (
        "error: upload.chunk_overlap must be in [0, 99] (below upload.chunk_size = 100), got 800")
    monkeypatch.setenv("MXRAG_UPLOAD__MAX_FILE_MB", "1000")
    too_big = invoke("config", "show")
    assert too_big.exit_code == 1
    assert one_line_error(too_big.stderr) == "error: upload.max_file_mb must be in [1, 100], got '1000'"


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "mx_rag.cli", "--debug", "kb", "show", "nope", "--data-dir", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=clean_env(), check=False)
    assert done.returncode == 1 and "Traceback" in done.stderr and "KnowledgeNotFound" in done.stderr
    command.remove("--debug")
    quiet = subprocess.run(command, capture_output=True, text=True, timeout=120, env=clean_env(), check=False)
    assert quiet.returncode == 1 and one_line_error(quiet.stderr)


@pytest.mark.parametrize(("args", "line"), [
    (["search", "q", "--k", "0"], "error: --k must be an integer in [1, 100], got '0' (see `mxrag search --help`)"),
    (["ask", "q", "--temperature", "3"],
     "error: --temperature must be a number in [0.0, 2.0], got '3' (see `mxrag ask --help`)"),
    (["keys", "revoke", "abc"], "error: KEY_ID must be an integer, got 'abc' (see `mxrag keys revoke --help`)"),
    (["kb", "show"], "error: Missing argument 'name' (see `mxrag kb show --help`)"),
    (["bogus"], "error: No such command 'bogus' (see `mxrag --help`)"),
])
def test_a_usage_error_is_one_line_with_the_value_and_the_range(tmp_path: Path, args: list[str], line: str) -> None:
    command = [sys.executable, "-m", "mx_rag.cli", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=clean_env(), check=False,
                          cwd=tmp_path)
    assert (done.returncode, done.stderr, done.stdout) == (2, line + "\n", "")


def test_import_of_the_command_stays_light() -> None:
    code = ("import sys, mx_rag.cli.main; heavy = {'torch', 'transformers', 'faiss', 'fastapi', 'sqlalchemy', "
            "'rich', 'mx_rag.server', 'mx_rag.knowledge'} & set(sys.modules); assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=clean_env())
