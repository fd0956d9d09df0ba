"""2-3 swap (Yu, Wang, Ma, SC08), the compositing of the cluster study.

The cluster study: Tkachev et al., "Prediction of Distributed Volume Visualization Performance
to Support Render Hardware Acquisition".

At each stage sets of ranks are merged in groups of 2 or 3 (any P, floor(log2 P) stages); a
merged set of M ranks splits the image into M equal pieces, each rank taking the piece that
overlaps its old piece most, and receives the overlapping parts of the others' pieces
(direct send, usually at most 4 partners).
"""

from __future__ import annotations

from collections.abc import Sequence

from raytracer.volume.compositing.base import Span, Stage, overlap, span_length, split_span


def _assign(members: list[int], spans: Sequence[Span], pieces: list[Span]) -> dict[int, Span]:
    """Give each member one new piece, largest overlap with its old piece first (greedy,
    deterministic), so most of every new piece is already local."""
    pairs = sorted(
        (-span_length(overlap(spans[v], p)), i, j)
        for i, v in enumerate(members)
        for j, p in enumerate(pieces)
    )
    taken_v: set[int] = set()
    taken_p: set[int] = set()
    out: dict[int, Span] = {}
    for _, i, j in pairs:
        if i not in taken_v and j not in taken_p:
            taken_v.add(i)
            taken_p.add(j)
            out[members[i]] = pieces[j]
    return out


def stages(ranks: int, npix: int, k: int = 8) -> list[Stage]:
    """2-3 swap's stages (``k`` unused): floor(log2 P) merges of sets in groups of 2 or 3."""
    spans: list[Span] = [(0, npix)] * ranks
    sets: list[tuple[int, ...]] = [(v,) for v in range(ranks)]
    stages: list[Stage] = []
    while len(sets) > 1:
        n = len(sets)
        sizes = [3] + [2] * ((n - 3) // 2) if n % 2 else [2] * (n // 2)
        new = list(spans)
        groups, merged, i = [], [], 0
        for size in sizes:
            children = tuple(sets[i : i + size])
            i += size
            members = [v for child in children for v in child]
            pieces = split_span(0, npix, len(members))
            for v, piece in _assign(members, spans, pieces).items():
                new[v] = piece
            groups.append(children)
            merged.append(tuple(members))
        stages.append(Stage(f"2-3 stage {len(stages) + 1}", tuple(groups), tuple(new)))
        spans, sets = new, merged
    return stages
