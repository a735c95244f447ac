# SPDX-License-Identifier: Apache-2.0
"""``mxrag ingest``: real files of tests/data/docs and the real embedding model, in a folder with
a broken file, an unsupported one, a hidden one and symbolic links; missing and unsupported paths;
the failure memo; ``--prune``; Ctrl-C in the middle of a subprocess; the progress bar on a terminal.

One knowledge base is shared by the module; the tests after the first read and extend it in order.
"""

from __future__ import annotations

import json
import os
import pty
import queue
import random
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.cli.cli_helpers import MXRAG, clean_env, copy_docs, invoke, mxrag, one_line_error

pytestmark = pytest.mark.slow

GOOD = ("simple-table.md", "codeblock.md", "umlauts-non-utf8.md")
SMALL_CHUNKS = "[upload]\nchunk_size = {size}\nchunk_overlap = 0\n"  # ./mxrag.toml: less to embed, same code


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A working folder whose docs/ holds 3 good files, a nested one, a password-protected PDF, a
    file without a loader, a hidden file, a broken link, a link to a file outside and a link to a
    folder; ingested once as a subprocess (``docs`` and a missing path)."""
    cwd = tmp_path_factory.mktemp("site")
    (cwd / "mxrag.toml").write_text(SMALL_CHUNKS.format(size=300), encoding="utf-8")
    docs = copy_docs(cwd / "docs", *GOOD, "password.pdf")
    (docs / "sub").mkdir()
    (docs / "sub" / "nested.md").write_text("# Nested\n\nThe nested page talks about harbours.\n", encoding="utf-8")
    (docs / "notes.xyz").write_text("no loader for this", encoding="utf-8")
    (docs / ".hidden.md").write_text("hidden", encoding="utf-8")
    (docs / "stray.md").symlink_to(cwd / "nowhere.md")
    (cwd / "outside").mkdir()
    (cwd / "outside" / "far.txt").write_text("A file outside the folder, reached by a link.", encoding="utf-8")
    (docs / "far-link.txt").symlink_to(cwd / "outside" / "far.txt")
    (docs / "loop").symlink_to(docs, target_is_directory=True)
    done = mxrag("ingest", "docs", "missing.md", "--kb", "handbook", cwd=cwd)
    return {"cwd": cwd, "docs": docs, "first": done}


def data_dir(site: dict[str, Any]) -> str:
    return str(site["cwd"] / ".mxrag")


def show(site: dict[str, Any]) -> dict[str, Any]:
    result = invoke("kb", "show", "handbook", "--json", "--data-dir", data_dir(site))
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def test_first_ingest_names_every_file_and_stores_the_good_ones(site: dict[str, Any]) -> None:
    done = site["first"]
    assert done.returncode == 1, done.stderr  # a file failed and a path is missing
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr and "pypdf" not in done.stderr
    assert "created knowledge base 'handbook'" in lines
    for name in (*GOOD, "sub/nested.md", "far-link.txt"):
        assert any(line.startswith("added") and line.split()[1] == f"docs/{name}" for line in lines), (name, lines)
    assert "failed     docs/password.pdf: is encrypted (password-protected); remove the password before loading it" \
        in lines
    assert "failed     missing.md: no such file or folder" in lines
    assert "failed     docs/stray.md: broken symbolic link" in lines
    assert "skipped    docs/notes.xyz: no loader for '.xyz'" in lines
    assert "skipped    docs/loop: symbolic link to a folder (not followed)" in lines
    assert not any(".hidden" in line for line in lines)
    assert lines[-1].startswith("knowledge base 'handbook': 5 added, 0 updated, 0 unchanged, 3 failed, 2 skipped (")
    assert done.stdout == ""


def test_kb_show_lists_the_documents_with_their_files(site: dict[str, Any]) -> None:
    described = show(site)
    paths = sorted(Path(d["path"]).name for d in described["documents"])
    assert paths == sorted(["simple-table.md", "codeblock.md", "umlauts-non-utf8.md", "nested.md", "far.txt"])
    assert all(d["chunks"] >= 1 for d in described["documents"])
    assert described["chunks"] == sum(d["chunks"] for d in described["documents"])


def test_a_terminal_gets_a_progress_bar_with_rates(site: dict[str, Any]) -> None:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*MXRAG, "ingest", "docs", "--kb", "handbook"], cwd=site["cwd"],
                            env=clean_env() | {"COLUMNS": "160", "TERM": "xterm"}, stdout=subprocess.PIPE,
                            stderr=follower, text=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the other end closed
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(leader)
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 1, screen
    assert "files/s" in screen and "chunks/s" in screen
    assert "failed     docs/password.pdf: is encrypted" in screen  # failures above the bar
    assert "knowledge base 'handbook': 0 added, 0 updated, 5 unchanged, 2 failed, 2 skipped" in screen
    assert "unchanged  docs/" not in screen  # per-file lines are for logs, not for the terminal


def test_again_nothing_is_parsed_and_the_failure_is_remembered(site: dict[str, Any], monkeypatch: Any) -> None:
    monkeypatch.chdir(site["cwd"])
    result = invoke("ingest", "docs", "--kb", "handbook", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["added"] == [] and report["updated"] == [] and len(report["unchanged"]) == 5
    assert "unchanged since it failed; --retry-failed parses it again" in report["failed"]["docs/password.pdf"]
    assert report["skipped"] == {"docs/notes.xyz": "no loader for '.xyz'",
                                 "docs/loop": "symbolic link to a folder (not followed)"}
    retried = invoke("ingest", "docs/password.pdf", "--kb", "handbook", "--retry-failed")
    assert retried.exit_code == 1
    assert "failed     docs/password.pdf: is encrypted" in retried.stderr and "unchanged since" not in retried.stderr


def test_a_named_file_without_a_loader_fails(site: dict[str, Any], monkeypatch: Any) -> None:
    monkeypatch.chdir(site["cwd"])
    result = invoke("ingest", "docs/notes.xyz", "--kb", "handbook")
    assert result.exit_code == 1
    assert "failed     docs/notes.xyz: no loader for '.xyz' (supported: " in result.stderr
    assert "0 added, 0 updated, 0 unchanged, 1 failed" in result.stderr


def test_a_changed_file_is_updated(site: dict[str, Any], monkeypatch: Any) -> None:
    monkeypatch.chdir(site["cwd"])
    nested = site["docs"] / "sub" / "nested.md"
    nested.write_text("# Nested\n\nThe nested page now talks about lighthouses.\n", encoding="utf-8")
    before = {Path(d["path"]).name: d for d in show(site)["documents"]}
    assert before["nested.md"]["changed"] and not before["far.txt"]["changed"]
    listed = invoke("kb", "show", "handbook", "--data-dir", data_dir(site)).stdout
    assert [line for line in listed.splitlines() if "(changed since stored)" in line] == [
        line for line in listed.splitlines() if line.endswith("docs/sub/nested.md  (changed since stored)")
    ] != []
    result = invoke("ingest", "docs/sub", "--kb", "handbook")
    assert result.exit_code == 0, result.stderr
    assert "updated    docs/sub/nested.md (1 chunk)" in result.stderr
    assert not any(d["changed"] for d in show(site)["documents"])


def test_prune_removes_the_documents_of_deleted_files_only(site: dict[str, Any], monkeypatch: Any) -> None:
    monkeypatch.chdir(site["cwd"])
    (site["docs"] / "codeblock.md").unlink()
    kept = invoke("ingest", "docs/sub", "--kb", "handbook")  # without --prune nothing goes
    assert kept.exit_code == 0 and "codeblock.md" in json.dumps(show(site))
    pruned = invoke("ingest", "docs/sub", "--kb", "handbook", "--prune")  # docs/ was not named: nothing goes
    assert "removed" not in pruned.stderr
    pruned = invoke("ingest", "docs", "--kb", "handbook", "--prune", "--json")
    assert pruned.exit_code == 1  # password.pdf still fails
    assert json.loads(pruned.stdout)["removed"] == ["docs/codeblock.md"]
    assert "removed    docs/codeblock.md: its file is gone" in pruned.stderr
    names = [Path(d["path"]).name for d in show(site)["documents"]]
    assert "codeblock.md" not in names and "far.txt" in names  # outside docs/ but found through its link
    gone = invoke("ingest", "docs/sub", "--kb", "handbook", "--prune")
    assert gone.exit_code == 0
    (site["docs"] / "sub" / "nested.md").unlink()
    (site["docs"] / "sub").rmdir()
    gone = invoke("ingest", "docs/sub", "--kb", "handbook", "--prune")  # a deleted folder named: its documents go
    assert gone.exit_code == 0, gone.stderr
    assert "removed    docs/sub/nested.md: its file is gone" in gone.stderr
    assert "failed     docs/sub" not in gone.stderr  # the path is gone, and that is what --prune is for
    again = invoke("ingest", "docs/sub", "--kb", "handbook", "--prune")  # nothing left to remove: a failure again
    assert again.exit_code == 1 and "failed     docs/sub: no such file or folder" in again.stderr


def test_an_unknown_data_folder_setting_is_one_line(tmp_path: Path) -> None:
    result = invoke("ingest", str(tmp_path), "--kb", "bad/name", "--data-dir", str(tmp_path / "d"))
    assert result.exit_code == 1
    assert "knowledge base name 'bad/name' must be" in one_line_error(result.stderr)
    usage = invoke("ingest", "--kb", "x")
    assert usage.exit_code == 2


def test_nothing_to_ingest_leaves_no_new_knowledge_base(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    result = invoke("ingest", str(tmp_path / "nowhere"), "--kb", "fresh", "--data-dir", data)
    assert result.exit_code == 1
    assert "nowhere: no such file or folder" in result.stderr and "created" not in result.stderr
    listed = invoke("kb", "list", "--json", "--data-dir", data)
    assert listed.exit_code == 0 and "fresh" not in listed.stdout


def _corpus(folder: Path, files: int) -> Path:
    """``files`` distinct text files of about 40 chunks of 100 characters each (one commit per file)."""
    folder.mkdir()
    (folder.parent / "mxrag.toml").write_text(SMALL_CHUNKS.format(size=100), encoding="utf-8")
    rng = random.Random(7)
    words = ["river", "harbour", "ledger", "vector", "index", "chunk", "lantern", "meadow", "copper", "orbit"]
    for i in range(files):
        text = "\n\n".join(f"File {i}, paragraph {j}: " + " ".join(rng.choice(words) for _ in range(10))
                           for j in range(40))
        (folder / f"part-{i:02}.txt").write_text(text, encoding="utf-8")
    return folder


def _lines(stream: Any) -> queue.Queue[str]:
    box: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            box.put(line)
        box.put("")

    threading.Thread(target=pump, daemon=True).start()
    return box


def test_ctrl_c_keeps_what_was_stored_and_says_so(tmp_path: Path, monkeypatch: Any) -> None:
    _corpus(tmp_path / "many", 6)
    proc = subprocess.Popen([*MXRAG, "ingest", "many", "--kb", "big"], cwd=tmp_path, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    box, seen = _lines(proc.stderr), []
    try:
        while not any(line.startswith("added") for line in seen):
            line = box.get(timeout=240)
            assert line, f"ended before storing a file: {''.join(seen)}"
            seen.append(line)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    while (line := box.get(timeout=10)) != "":
        seen.append(line)
    stderr = "".join(seen)
    assert rc == 130, stderr
    assert "stopping after the files being stored (Ctrl-C again to stop at once)" in stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    added = [line.split()[1] for line in seen if line.startswith("added")]
    assert 1 <= len(added) < 6, stderr
    assert (f"interrupted (stopped after the files being stored): kept {len(added)} file(s) stored in this run, "
            f"0 unchanged; {6 - len(added)} not ingested: run the same command again to continue") in stderr
    described = invoke("kb", "show", "big", "--json", "--data-dir", str(tmp_path / ".mxrag"))
    assert sorted(Path(d["path"]).name for d in json.loads(described.stdout)["documents"]) == \
        sorted(Path(a).name for a in added)
    monkeypatch.chdir(tmp_path)
    again = invoke("ingest", "many", "--kb", "big")
    assert again.exit_code == 0, again.stderr
    assert f"{6 - len(added)} added, 0 updated, {len(added)} unchanged, 0 failed" in again.stderr
