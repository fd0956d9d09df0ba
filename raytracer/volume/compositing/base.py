"""What every compositing schedule is: stages of groups in virtual ranks, and the timings.

A schedule (one module each: ``binary_swap``, ``two_three_swap``, ``radix_k``) is a pure
function ``stages(ranks, npix, k) -> list[Stage]`` (:class:`Schedule`), identical on every
rank; the engine (``engine``) runs any of them over MPI or serially. Pixel spans are
``[lo, hi)`` ranges of the flattened image.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

Span = tuple[int, int]  # [lo, hi) in pixels; (0, 0) = empty


@dataclass(frozen=True)
class Stage:
    """One compositing stage in virtual ranks.

    ``groups``: each group is a tuple of children (front to back); each child is a tuple of
    virtual ranks that together hold the composite of one contiguous depth range, their
    current pieces tiling the image. ``spans``: every virtual rank's piece after the stage
    (ranks in no group keep theirs).
    """

    name: str
    groups: tuple[tuple[tuple[int, ...], ...], ...]
    spans: tuple[Span, ...]


class Schedule(Protocol):
    """One compositing algorithm: its stages for ``ranks`` virtual ranks and ``npix`` pixels
    (``k``: the largest group, where the algorithm has one)."""

    def __call__(self, ranks: int, npix: int, k: int = 8) -> list[Stage]: ...


@dataclass
class StageTiming:
    """What one rank did in one stage (or the gather)."""

    name: str
    seconds: float = 0.0
    blend_seconds: float = 0.0
    bytes_sent: int = 0
    bytes_received: int = 0
    blended_pixels: int = 0
    partners: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


@dataclass
class CompositeResult:
    """Result on one rank: the final image on rank 0 (None elsewhere) and this rank's timings."""

    image: np.ndarray | None
    stages: list[StageTiming]
    gather: StageTiming
    seconds: float
    algorithm: str
    transport: str = "messages"  # which ran: "messages" or "shared" (.shared_window)

    def to_dict(self) -> dict[str, Any]:
        """Timings as a plain dict (the image is left out)."""
        return {
            "algorithm": self.algorithm,
            "transport": self.transport,
            "seconds": self.seconds,
            "stages": [s.to_dict() for s in self.stages],
            "gather": self.gather.to_dict(),
        }


def split_span(lo: int, hi: int, parts: int) -> list[Span]:
    """[lo, hi) cut into ``parts`` near-equal consecutive spans."""
    n = hi - lo
    cuts = [lo + (n * i) // parts for i in range(parts + 1)]
    return [(cuts[i], cuts[i + 1]) for i in range(parts)]


def span_length(span: Span) -> int:
    """Pixels in ``span``."""
    return span[1] - span[0]


def overlap(a: Span, b: Span) -> Span:
    """The pixels ``a`` and ``b`` share ((0, 0) if none)."""
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo < hi else (0, 0)
