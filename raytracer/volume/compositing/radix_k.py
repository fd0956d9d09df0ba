"""Radix-k (Peterka et al. 2009; IceT's default, k = 8).

P is factored into rounds of at most k (a prime above k is a round of its own); in each
round groups of k_i ranks split their common piece into k_i parts by direct send.
"""

from __future__ import annotations

from raytracer.volume.compositing.base import Span, Stage, split_span


def factor_rounds(ranks: int, k: int = 8) -> list[int]:
    """Radix-k round sizes: prime factors of ``ranks`` packed greedily into factors <= k.

    A prime above k stays a round of its own. ``factor_rounds(1) == []``.
    """
    if ranks < 1 or k < 2:
        raise ValueError(f"need ranks >= 1 and k >= 2, got ranks={ranks}, k={k}")
    primes, n, p = [], ranks, 2
    while n > 1:
        while n % p == 0:
            primes.append(p)
            n //= p
        p += 1 if p == 2 else 2
        if p * p > n and n > 1:
            primes.append(n)
            break
    rounds: list[int] = []
    for q in sorted(primes, reverse=True):
        for i, r in enumerate(rounds):
            if r * q <= k:
                rounds[i] = r * q
                break
        else:
            rounds.append(q)
    return sorted(rounds, reverse=True)


def stages(ranks: int, npix: int, k: int = 8) -> list[Stage]:
    """Radix-k's stages: one round per factor of :func:`factor_rounds`."""
    spans: list[Span] = [(0, npix)] * ranks
    stages: list[Stage] = []
    stride = 1
    for r, size in enumerate(factor_rounds(ranks, k)):
        new = list(spans)
        groups = []
        for base in range(ranks):
            if (base // stride) % size:
                continue
            members = [base + j * stride for j in range(size)]
            for v, piece in zip(members, split_span(*spans[base], size), strict=True):
                new[v] = piece
            groups.append(tuple((v,) for v in members))
        stages.append(Stage(f"round {r + 1} (k={size})", tuple(groups), tuple(new)))
        spans = new
        stride *= size
    return stages
