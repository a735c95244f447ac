"""Hypothesis profiles of the fuzz suite and its shared fixtures.

Two profiles are registered (and applied per test through ``fuzz_helpers.fuzz``, so the rest of
the suite keeps Hypothesis' defaults):

* ``mxrag-fuzz-ci`` (the default): a few examples per target, ``derandomize=True`` so every CI run
  tries the same inputs, no example database, no deadline (slow machines must not fail);
* ``mxrag-fuzz-long``: chosen when ``MXRAG_FUZZ_EXAMPLES`` is set, e.g.
  ``MXRAG_FUZZ_EXAMPLES=2000 pytest tests/fuzz --hypothesis-show-statistics``: that many examples
  per target, random (not derandomized) so each long run explores new inputs; a failure prints
  the ``@reproduce_failure`` blob.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from fuzz_helpers import HOSTILE_RUN, HostileRun
from hypothesis import HealthCheck, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile(
    "mxrag-fuzz-ci",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=_SLOW_OK,
)
settings.register_profile(
    "mxrag-fuzz-long",
    parent=settings.get_profile("mxrag-fuzz-ci"),
    derandomize=False,
    max_examples=max(1, int(os.environ.get("MXRAG_FUZZ_EXAMPLES") or 1)),
)


@pytest.fixture(scope="session")
def docs_dir() -> Path:
    """tests/data/docs: the real files the fuzz targets mutate."""
    return Path(__file__).resolve().parent.parent / "data" / "docs"


@pytest.fixture(scope="session")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory for the files the fuzz examples write (one fixed name per target)."""
    return tmp_path_factory.mktemp("fuzz")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the hostile-input runner as soon as its tests are collected: it builds its files and
    runs its cases on another core while the other fuzz targets run here."""
    if HOSTILE_RUN in config.stash or not any("test_hostile_inputs.py" in item.nodeid for item in items):
        return
    directory = Path(tempfile.mkdtemp(prefix="mxrag-hostile-"))
    runner = Path(__file__).resolve().parent / "hostile_runner.py"
    with (directory / "results.json").open("wb") as out, (directory / "stderr.txt").open("wb") as err:
        process = subprocess.Popen([sys.executable, str(runner), "--build", str(directory)], stdout=out, stderr=err)
    config.stash[HOSTILE_RUN] = HostileRun(process, directory)


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(HOSTILE_RUN, None)
    if run is not None:
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait()
        shutil.rmtree(run.directory, ignore_errors=True)
