"""Seconds an OpenCL command ran, from its profiling event: one place for the nanosecond
arithmetic every kernel timer here shares (the queue must have profiling enabled)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyopencl as cl


def event_seconds(event: cl.Event) -> float:
    """Seconds between the command's start and end on the device (its profiling counters)."""
    return (event.profile.end - event.profile.start) * 1e-9


def events_seconds(events: Sequence[cl.Event]) -> float:
    """Seconds the commands ran, summed (a phase launched as several kernels)."""
    return sum(event_seconds(e) for e in events)
