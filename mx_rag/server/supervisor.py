# SPDX-License-Identifier: Apache-2.0
"""``Supervisor``: uvicorn's supervisor of ``mxrag serve --workers N``, with two bounds it lacks.

- A stop signal (SIGTERM, SIGINT) is acted on within about half a second. uvicorn pings a worker
  and waits for its answer up to the whole health-check timeout (a minute here, so that a worker
  starved of CPU is not taken for hung) before it looks at its signals again; a worker it has just
  restarted answers only once its interpreter is up, so a stop that came then waited a minute.
- A worker still running ``timeout_graceful_shutdown`` + 20 s after it was told to stop is killed,
  so ``mxrag serve`` always ends (systemd and the tests wait on it) and logs which worker it killed.
"""

from __future__ import annotations

import logging
import pickle
import time

from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess, Process

__all__ = ["Supervisor"]

logger = logging.getLogger("uvicorn.error")

_SLICE_S = 0.5  # how often a wait for a worker looks for a stop signal
_KILL_AFTER_S = 20.0  # past the graceful shutdown, before a stopping worker is killed


class Supervisor(Multiprocess):
    """Starts ``config.workers`` workers, restarts one that dies or hangs, stops them all on a signal."""

    def keep_subprocess_alive(self) -> None:
        for idx, process in enumerate(self.processes):
            if self._stopping():
                return  # the run loop handles the signal before anything else
            if self._answers(process):
                continue
            process.kill()  # dead, or hung past the health-check timeout
            process.join()
            if process.exitcode == STARTUP_FAILURE:  # the app cannot start: restarting would fail again
                logger.error("Worker [%s] failed to start; stopping", process.pid)
                self.should_exit.set()
                return
            if self._stopping():
                return
            logger.info("Worker [%s] died; starting another", process.pid)
            replacement = Process(self.config, self.sockets)
            replacement.start()
            self.processes[idx] = replacement

    def join_all(self) -> None:
        allowed = (self.config.timeout_graceful_shutdown or 0) + _KILL_AFTER_S
        deadline = time.monotonic() + allowed
        for process in self.processes:
            process.process.join(max(0.0, deadline - time.monotonic()))
            if process.process.is_alive():
                logger.warning("Worker [%s] did not stop within %.0f s of the signal; killing it", process.pid, allowed)
                process.process.kill()
                process.process.join()

    def _stopping(self) -> bool:
        return self.should_exit.is_set() or bool(self.signal_queue)

    def _answers(self, process: Process) -> bool:
        """Whether ``process`` answers a health ping within the health-check timeout; a stop signal
        ends the wait early (the worker counts as alive: it is about to be stopped anyway)."""
        if not process.process.is_alive():
            return False
        deadline = time.monotonic() + self.config.timeout_worker_healthcheck
        try:
            process.parent_conn.send(b"ping")
            while not process.parent_conn.poll(_SLICE_S):
                if self._stopping():
                    return True
                if time.monotonic() >= deadline or not process.process.is_alive():
                    return False
            process.parent_conn.recv()
        except (OSError, EOFError, pickle.UnpicklingError):
            return False
        return True
