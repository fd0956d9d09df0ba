"""The registry of compositing schedules: each algorithm's name and its stages function."""

from __future__ import annotations

import functools

from raytracer.volume.compositing import binary_swap, radix_k, two_three_swap
from raytracer.volume.compositing.base import Schedule, Span, Stage

SCHEDULES: dict[str, Schedule] = {
    "binary-swap": binary_swap.stages,
    "2-3-swap": two_three_swap.stages,
    "radix-k": radix_k.stages,
}
ALGORITHMS = tuple(SCHEDULES)


@functools.lru_cache(maxsize=64)
def schedule(algorithm: str, ranks: int, npix: int, k: int = 8) -> tuple[Stage, ...]:
    """The stages of ``algorithm`` for ``ranks`` virtual ranks and ``npix`` pixels."""
    if ranks < 1 or npix < 1:
        raise ValueError(f"need ranks >= 1 and pixels >= 1, got {ranks} and {npix}")
    if algorithm not in SCHEDULES:
        raise ValueError(f"unknown compositing algorithm {algorithm!r}; choose from {ALGORITHMS}")
    return tuple(SCHEDULES[algorithm](ranks, npix, k))


def final_spans(algorithm: str, ranks: int, npix: int, k: int = 8) -> tuple[Span, ...]:
    """Every virtual rank's piece of the final image (they tile [0, npix))."""
    stages = schedule(algorithm, ranks, npix, k)
    return stages[-1].spans if stages else ((0, npix),)
