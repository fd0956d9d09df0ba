"""The one worker thread a renderer's probe runs ahead on: the next view probed while the
device renders this one (Ganestam & Doggett's probe beside the GPU's frame), started on first
use, ended by :meth:`ProbeWorker.close`. Both renderers' probes hold one."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class ProbeWorker:
    """A single worker thread named ``name``-N, made when the first probe is submitted."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, probe: Callable[..., T], *args: Any) -> Future[T]:
        """Run ``probe(*args)`` on the worker thread; probes submitted together queue."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
        return self._pool.submit(probe, *args)

    def close(self) -> None:
        """Let the running probe finish and end the thread (a later submit starts another)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
