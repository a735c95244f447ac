"""Coverage-guided fuzzing of the pure-Python parsers with Atheris (libFuzzer), outside pytest.

Not part of CI (Atheris is not a dependency). Run, for example::

    pip install --target /tmp/atheris atheris      # a manylinux wheel
    PYTHONPATH=/tmp/atheris .venv/bin/python tests/fuzz/atheris_parsers.py json_repair -max_total_time=120

Targets: ``json_repair`` (``loads_tolerant``: a dict or list, or ValueError), ``markdown``
(``replace_images``: images replaced, text kept), ``retrieval`` (``normalize_retrieve_api_results``
on any JSON the bytes decode to). Any other exception is a crash, reported by libFuzzer with
the input that caused it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import atheris

with atheris.instrument_imports(include=["mx_rag"]):
    from mx_rag.corag.retrieval_api import normalize_retrieve_api_results
    from mx_rag.document.loader.md_loader import replace_images
    from mx_rag.graphrag.json_repair import loads_tolerant


def _text(data: bytes) -> str:
    return atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(len(data))


def json_repair(data: bytes) -> None:
    try:
        value = loads_tolerant(_text(data))
    except ValueError:
        return
    assert isinstance(value, (dict, list)), type(value)


def markdown(data: bytes) -> None:
    text = _text(data)
    out = replace_images(text, lambda alt, target: "")
    assert len(out) <= len(text)


def retrieval(data: bytes) -> None:
    try:
        value: Any = json.loads(data)
    except (ValueError, RecursionError):
        return
    for doc in normalize_retrieve_api_results(value):
        assert isinstance(doc.id, str) and isinstance(doc.text, str) and doc.text.strip()


TARGETS = {"json_repair": json_repair, "markdown": markdown, "retrieval": retrieval}


def main() -> None:
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
