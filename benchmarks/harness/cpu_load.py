"""A load that changes: CPU-bound child processes started and stopped mid-run.

Each child spins on the clock and ends by itself after ``limit_s`` whatever happens to the
benchmark (killed, crashed), so it can never outlive it by more than that; :meth:`CpuLoad.stop`
ends it sooner, and leaving the ``with`` block stops it too.
"""

from __future__ import annotations

import subprocess
import sys
from types import TracebackType

SPIN = ("import time\n"
        "end = time.monotonic() + {limit}\n"
        "while time.monotonic() < end:\n"
        "    pass\n")


class CpuLoad:
    """``processes`` busy children, each ending by itself after ``limit_s`` seconds."""

    def __init__(self, processes: int = 1, limit_s: float = 30.0) -> None:
        if processes < 1 or not limit_s > 0:
            raise ValueError(f"need at least one process and a positive limit, got "
                             f"{processes} and {limit_s}")
        self.processes, self.limit_s = processes, float(limit_s)
        self._children: list[subprocess.Popen] = []

    def start(self) -> None:
        """Start the busy children (no-op while they run)."""
        if self.running:
            return
        code = SPIN.format(limit=self.limit_s)
        self._children = [subprocess.Popen([sys.executable, "-I", "-c", code])
                          for _ in range(self.processes)]

    def stop(self) -> None:
        """End every child now and reap it (terminate, then kill one that lingers)."""
        for child in self._children:
            if child.poll() is None:
                child.terminate()
        for child in self._children:
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    @property
    def running(self) -> bool:
        """Whether any child still spins."""
        return any(child.poll() is None for child in self._children)

    @property
    def ended(self) -> bool:
        """Whether children were started and all of them have ended."""
        return bool(self._children) and not self.running

    def __enter__(self) -> CpuLoad:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
