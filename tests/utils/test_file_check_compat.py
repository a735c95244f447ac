"""FileCheck, the original's static path checks, on real files, directories and symlinks."""

import os
from pathlib import Path

import pytest

from mx_rag.errors import ParameterError
from mx_rag.utils.file_check import FileCheck, FileCheckError


def test_dir_check_accepts_a_directory(tmp_path: Path) -> None:
    out = tmp_path / "embedding" / "1"
    out.mkdir(parents=True)
    FileCheck.dir_check(str(out))  # the original's finetune example, after os.makedirs


def test_dir_check_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("out").mkdir()
    FileCheck.dir_check("out")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: str(p / "missing"), "must be an existing directory"),
        (lambda p: str(p / "f.txt"), "must be an existing directory"),
        (lambda p: str(p / "link"), "without symbolic links"),
        (lambda p: str(p / "d" / ".." / "d"), "without '..'"),
        (lambda p: "/" + "a" * 1100, "more than 1024"),
        (lambda p: "", "non-empty str"),
    ],
)
def test_dir_check_refusals(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "d").mkdir()
    (tmp_path / "f.txt").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "d")
    with pytest.raises(FileCheckError, match=message):
        FileCheck.dir_check(make(tmp_path))


def test_blacklist_and_existence(tmp_path: Path) -> None:
    FileCheck.check_input_path_valid(str(tmp_path), check_blacklist=False)
    with pytest.raises(ParameterError, match="lies under '/etc/'"):
        FileCheck.check_input_path_valid("/etc/passwd", check_blacklist=True)
    with pytest.raises(ParameterError, match="an existing path"):
        FileCheck.check_path_is_exist_and_valid(str(tmp_path / "nope"))
    FileCheck.check_path_is_exist_and_valid(str(tmp_path))


def test_size_count_name_owner_mode(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_bytes(b"x" * 100)
    (tmp_path / "b.txt").write_text("y")
    FileCheck.check_file_size(str(f), 100)
    with pytest.raises(ParameterError, match="more than the limit of 99 bytes"):
        FileCheck.check_file_size(str(f), 99)
    FileCheck.check_files_num_in_directory(str(tmp_path), ".txt", 2)
    with pytest.raises(ParameterError, match=r"holds 2 \.txt files, more than the limit of 1"):
        FileCheck.check_files_num_in_directory(str(tmp_path), ".txt", 1)
    FileCheck.check_filename_valid(str(f))
    with pytest.raises(ParameterError, match="more than 3"):
        FileCheck.check_filename_valid(str(f), 3)
    FileCheck.check_file_owner(str(f))
    os.chmod(f, 0o644)
    FileCheck.check_mode(str(f), 0o755)
    os.chmod(f, 0o666)
    with pytest.raises(ParameterError, match="grants more than 0o644"):
        FileCheck.check_mode(str(f), 0o644)
