"""Binary swap (Ma et al. 1994): pairs swap halves, log2 P rounds.

A non-power-of-two count first folds the extra ranks into their depth neighbour (a
whole-image send, stage "fold"); then in round r every active rank pairs with the one whose
index differs in bit r, the front one keeping the first half of their common piece.
"""

from __future__ import annotations

from raytracer.volume.compositing.base import Span, Stage


def stages(ranks: int, npix: int, k: int = 8) -> list[Stage]:
    """Binary swap's stages (``k`` unused): a fold of the extra ranks, then log2 P swaps."""
    spans: list[Span] = [(0, npix)] * ranks
    stages: list[Stage] = []
    m = ranks.bit_length() - 1
    extra = ranks - (1 << m)
    if extra:
        new = list(spans)
        for i in range(extra):
            new[2 * i + 1] = (0, 0)
        groups = tuple(((2 * i,), (2 * i + 1,)) for i in range(extra))
        stages.append(Stage("fold", groups, tuple(new)))
        spans = new
    active = [2 * i for i in range(extra)] + list(range(2 * extra, ranks))
    for r in range(m):
        bit = 1 << r
        new = list(spans)
        groups = []
        for a in range(len(active)):
            if a & bit:
                continue
            front, back = active[a], active[a | bit]
            lo, hi = spans[front]
            mid = lo + (hi - lo) // 2
            new[front], new[back] = (lo, mid), (mid, hi)
            groups.append(((front,), (back,)))
        stages.append(Stage(f"swap {r + 1}", tuple(groups), tuple(new)))
        spans = new
    return stages
