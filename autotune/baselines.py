"""The fair baselines' tuning, written once: a bisection by measurement.

Ganestam & Doggett, "Auto-tuning Interactive Ray Tracing using an Analytical GPU Architecture
Model", tuned their fixed baseline by hand on the first frame; here it is a bisection by
measurement along an order of settings whose cost rises.

Every benchmark that gives a fixed baseline its chance uses :func:`bisect_by_measurement` with
its own way to measure a setting (a live frame, a median of frames, a recorded time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Bisection:
    """What :func:`bisect_by_measurement` found: the index into the order, its measured
    seconds and how many settings it measured."""

    index: int
    seconds: float
    measured: int


def bisect_by_measurement(count: int, seconds_of: Callable[[int], float], target: float,
                          tolerance: float = 0.01, iterations: int = 10) -> Bisection:
    """The best-looking index of an order of ``count`` settings (cost rising with the index)
    whose measured seconds fit ``target``: bisection, stopping early once a measured setting
    is within ``tolerance`` of the target; index 0 when nothing measured fits."""
    if count < 1:
        raise ValueError("bisect_by_measurement needs at least one setting")
    lo, hi, best, best_seconds, measured = 0, count - 1, 0, float("nan"), 0
    for _ in range(iterations):
        mid = (lo + hi + 1) // 2
        seconds = seconds_of(mid)
        measured += 1
        if seconds <= target:
            best, best_seconds, lo = mid, seconds, mid
        else:
            hi = mid - 1
        if lo >= hi or abs(seconds / target - 1.0) < tolerance:
            break
    return Bisection(best, best_seconds, measured)
