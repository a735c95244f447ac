# SPDX-License-Identifier: Apache-2.0
"""The ``with`` protocol, once: ``Closable`` (clients and stores: ``close()`` on leaving) and
``Startable`` (servers: ``start()`` on entering, ``stop()`` on leaving)."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["Closable", "Startable"]


class Closable:
    """A base for objects holding connections or files, with ``close()`` (safe to call more than
    once): ``with obj:`` closes it on leaving, even on an error."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Startable:
    """A base for objects with ``start()``, which returns the object, and ``stop()``, which may be
    called more than once: ``with obj:`` starts it and stops it on leaving, even on an error."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
