# SPDX-License-Identifier: Apache-2.0
"""Script detection shared by the tokenizer, the prompts and the retrievers: ``HAN``, ``has_han``."""

from __future__ import annotations

import re

__all__ = ["HAN", "has_han"]

# the CJK unified ideographs (basic, extension A, compatibility, extensions B and later): a regex class body
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_HAN_CHAR = re.compile(f"[{HAN}]")


def has_han(text: str) -> bool:
    """Whether ``text`` holds a Chinese (Han) character.

    >>> has_han("Debian 的软件包"), has_han("Debian packages")
    (True, False)
    """
    return _HAN_CHAR.search(text) is not None
