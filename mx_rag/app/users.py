# SPDX-License-Identifier: Apache-2.0
"""Who a request or a command acts for."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LOCAL_USER", "Principal"]

LOCAL_USER = "Default"  # the user of local mode (no API keys configured) and of the command line


@dataclass(frozen=True)
class Principal:
    """Who a request acts for."""

    user_id: str
    admin: bool

    @classmethod
    def local(cls) -> Principal:
        return cls(LOCAL_USER, admin=True)
