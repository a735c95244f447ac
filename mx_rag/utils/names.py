# SPDX-License-Identifier: Apache-2.0
"""Entity names: the display label and the key two spellings of one name share."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["MAX_NAME_CHARS", "clean_label", "normalise_name"]

MAX_NAME_CHARS = 200
_SPACES = re.compile(r"\s+")
_TRIM = " \t\r\n\"'`“”‘’«»「」『』《》()[]{}<>.,;:!?，。；：！？、*_#"


def _cleaned(name: str) -> str:
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", name)).strip(_TRIM)


def clean_label(name: str) -> str:
    """A name for display: NFKC, outer quotes and punctuation trimmed, spaces collapsed."""
    return _cleaned(name)[:MAX_NAME_CHARS]


def normalise_name(name: str) -> str:
    """The key of a name: ``clean_label``, case-folded ("  “Alan  Turing”. " -> "alan turing");
    "" when nothing is left."""
    return _cleaned(name).casefold()[:MAX_NAME_CHARS]
