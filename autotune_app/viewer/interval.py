"""The time between two shown frames, part by part, and the renderer's share of it.

The viewer's target is the interval a person sees between two shown frames. The renderer (what
the tuner governs) gets that target less what the rest of the interval cost lately: the median,
over the last :data:`OUTSIDE_WINDOW` frames, of the interval less the renderer's measured
time. That rest is the display (upload, overlay), the read-back of a recording, presenting,
event polling and the loop's own bookkeeping; each is timed, and what no part explains is
``other``. At least :data:`MIN_RENDER_SHARE` of the target stays with the renderer, so a display
that costs most of the interval cannot starve it. The first shown frame (shaders compiled, the
font atlas built) does not count towards the rest.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

OUTSIDE_WINDOW = 15  # frames: the median of the rest of the interval follows this many
MIN_RENDER_SHARE = 0.25  # of the target, left to the renderer however dear the rest is
PARTS = ("poll", "renderer", "display", "record", "present")  # timed parts of an interval


class FrameInterval:
    """Times the parts of each interval between shown frames and gives the renderer's target."""

    def __init__(self, target_seconds: float) -> None:
        self.target_seconds = target_seconds  # between shown frames (the + / - keys set it)
        self.outside: deque[float] = deque(maxlen=OUTSIDE_WINDOW)
        self.parts = dict.fromkeys(PARTS, 0.0)
        self._last_shown: float | None = None  # when the previous frame was presented
        self._began = time.perf_counter()

    @property
    def render_target(self) -> float:
        """Seconds the renderer may take so that the whole interval holds the target."""
        return max(MIN_RENDER_SHARE * self.target_seconds, self.target_seconds - self.rest)

    @property
    def rest(self) -> float:
        """The median time outside the renderer over the recent intervals (0 before any)."""
        return float(np.median(self.outside)) if self.outside else 0.0

    def begin(self) -> None:
        """A frame starts; its interval runs from the previous frame's present (the first
        frame's from here)."""
        self.parts = dict.fromkeys(PARTS, 0.0)
        if self._last_shown is None:
            self._began = time.perf_counter()

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Time one part of this frame's interval (``name`` from :data:`PARTS`)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.parts[name] += time.perf_counter() - started

    def shown(self, measured_seconds: float) -> dict[str, float]:
        """The frame was presented; its interval and parts in ms (``other``: what no part
        explains), the renderer's measured time taken out of the rest."""
        now = time.perf_counter()
        first = self._last_shown is None
        interval = now - (self._began if first else self._last_shown)
        self._last_shown = now
        if not first:
            self.outside.append(max(0.0, interval - measured_seconds))
        other = interval - sum(self.parts.values())
        return {"interval_ms": interval * 1e3,
                **{f"{name}_ms": seconds * 1e3 for name, seconds in self.parts.items()},
                "other_ms": other * 1e3}

    def skip(self) -> None:
        """Nothing was shown (a minimised window): the next interval starts afresh."""
        self._last_shown = None
