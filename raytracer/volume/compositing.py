"""Sort-last compositing of per-rank premultiplied RGBA images over MPI (mpi4py buffers).

Every rank holds a full-size float32 RGBA image of its own brick. Given the front-to-back
visibility order of ranks (a list of rank ids, the same on every rank), :func:`composite`
blends them into one image and gathers it to rank 0.

Three algorithms, all run by one engine:

- ``"binary-swap"`` (Ma et al. 1994): pairs swap halves, log2 P rounds; a non-power-of-two
  count first folds the extra ranks into their depth neighbour (a whole-image send).
- ``"2-3-swap"`` (Yu, Wang, Ma, SC08; the compositing of seed 000): at each stage sets of
  ranks are merged in groups of 2 or 3 (any P, floor(log2 P) stages); a merged set of M
  ranks splits the image into M equal pieces, each rank taking the piece that overlaps its
  old piece most, and receives the overlapping parts of the others' pieces (direct send,
  usually at most 4 partners).
- ``"radix-k"`` (Peterka et al. 2009; IceT's default, k = 8): P is factored into rounds of
  at most k (a prime above k is a round of its own); in each round groups of k_i ranks
  split their common piece into k_i parts by direct send.

Ranks are renumbered by their position in the visibility order ("virtual ranks") before a
schedule is built, so every group always holds a contiguous depth range and blending
respects which side is in front for any order, not only rank order. Schedules are pure
functions of (algorithm, P, pixels) and are identical on every rank.

Timings: every rank records, per stage, its wall seconds, the part spent blending, bytes
sent and received and the real ranks it exchanged with; the same for the gather.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .span_blend import over_into_back, under_into_front

ALGORITHMS = ("binary-swap", "2-3-swap", "radix-k")
TAG_BASE = 7100  # message tags: TAG_BASE + stage index
CHUNK_PIXELS = 0  # 0: whole messages (1 MiB pieces blended on arrival measured no faster here)

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

    def to_dict(self) -> dict[str, Any]:
        """Timings as a plain dict (the image is left out)."""
        return {
            "algorithm": self.algorithm,
            "seconds": self.seconds,
            "stages": [s.to_dict() for s in self.stages],
            "gather": self.gather.to_dict(),
        }


# --------------------------------------------------------------------------- schedules


def _split(lo: int, hi: int, parts: int) -> list[Span]:
    """[lo, hi) cut into ``parts`` near-equal consecutive spans."""
    n = hi - lo
    cuts = [lo + (n * i) // parts for i in range(parts + 1)]
    return [(cuts[i], cuts[i + 1]) for i in range(parts)]


def _length(span: Span) -> int:
    return span[1] - span[0]


def _overlap(a: Span, b: Span) -> Span:
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo < hi else (0, 0)


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


def _binary_swap(ranks: int, npix: int) -> list[Stage]:
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


def _radix_k(ranks: int, npix: int, k: int) -> list[Stage]:
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
            for v, piece in zip(members, _split(*spans[base], size), strict=True):
                new[v] = piece
            groups.append(tuple((v,) for v in members))
        stages.append(Stage(f"round {r + 1} (k={size})", tuple(groups), tuple(new)))
        spans = new
        stride *= size
    return stages


def _assign(members: list[int], spans: Sequence[Span], pieces: list[Span]) -> dict[int, Span]:
    """Give each member one new piece, largest overlap with its old piece first (greedy,
    deterministic), so most of every new piece is already local."""
    pairs = sorted(
        (-_length(_overlap(spans[v], p)), i, j)
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


def _two_three_swap(ranks: int, npix: int) -> list[Stage]:
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
            pieces = _split(0, npix, len(members))
            for v, piece in _assign(members, spans, pieces).items():
                new[v] = piece
            groups.append(children)
            merged.append(tuple(members))
        stages.append(Stage(f"2-3 stage {len(stages) + 1}", tuple(groups), tuple(new)))
        spans, sets = new, merged
    return stages


@functools.lru_cache(maxsize=64)
def schedule(algorithm: str, ranks: int, npix: int, k: int = 8) -> tuple[Stage, ...]:
    """The stages of ``algorithm`` for ``ranks`` virtual ranks and ``npix`` pixels."""
    if ranks < 1 or npix < 1:
        raise ValueError(f"need ranks >= 1 and pixels >= 1, got {ranks} and {npix}")
    if algorithm == "binary-swap":
        return tuple(_binary_swap(ranks, npix))
    if algorithm == "2-3-swap":
        return tuple(_two_three_swap(ranks, npix))
    if algorithm == "radix-k":
        return tuple(_radix_k(ranks, npix, k))
    raise ValueError(f"unknown compositing algorithm {algorithm!r}; choose from {ALGORITHMS}")


def final_spans(algorithm: str, ranks: int, npix: int, k: int = 8) -> tuple[Span, ...]:
    """Every virtual rank's piece of the final image (they tile [0, npix))."""
    stages = schedule(algorithm, ranks, npix, k)
    return stages[-1].spans if stages else ((0, npix),)


def stage_partners(
    algorithm: str, order: Sequence[int], npix: int, k: int = 8
) -> list[list[list[int]]]:
    """``partners[rank][stage]``: the real ranks each rank exchanges with in each stage
    (what :class:`StageTiming.partners` records), computed from the schedule alone."""
    size = len(order)
    order = _check_order(order, size)
    out: list[list[list[int]]] = [[] for _ in range(size)]
    spans: Sequence[Span] = ((0, npix),) * size
    for stage in schedule(algorithm, size, npix, k):
        for me in range(size):
            plan = _plan(stage, spans, me)
            peers = set()
            if plan is not None:
                peers = {order[s] for _, s, _ in plan.recvs} | {order[d] for d, _ in plan.sends}
            out[order[me]].append(sorted(peers))
        spans = stage.spans
    return out


# --------------------------------------------------------------------- one rank's stage


@dataclass(frozen=True)
class _Plan:
    child: int  # index of my child in the group
    recvs: tuple[tuple[int, int, Span], ...]  # (child index, source virtual rank, span)
    sends: tuple[tuple[int, Span], ...]  # (destination virtual rank, span)


def _chunks(span: Span, chunk: int) -> list[Span]:
    lo, hi = span
    return [(a, min(a + chunk, hi)) for a in range(lo, hi, chunk)]


def _chunked(plan: _Plan, chunk: int) -> _Plan:
    """The same plan with every message cut into pieces of at most ``chunk`` pixels.

    Sender and receiver cut the same segment the same way and MPI keeps the order of
    messages between two ranks, so the pieces match. Each piece is blended as soon as it
    has arrived, while it is still in cache.
    """
    if chunk <= 0:
        return plan
    recvs = tuple((c, src, piece) for c, src, seg in plan.recvs for piece in _chunks(seg, chunk))
    sends = tuple((dst, piece) for dst, seg in plan.sends for piece in _chunks(seg, chunk))
    return _Plan(plan.child, recvs, sends)


def _plan(stage: Stage, old: Sequence[Span], me: int) -> _Plan | None:
    """What virtual rank ``me`` receives and sends in ``stage`` (None: not in a group)."""
    for children in stage.groups:
        ci = next((i for i, child in enumerate(children) if me in child), None)
        if ci is None:
            continue
        mine = stage.spans[me]
        recvs = []
        for cj, other in enumerate(children):
            for src in other:
                seg = _overlap(old[src], mine)
                if src != me and seg[1] > seg[0]:
                    recvs.append((cj, src, seg))
        sends = []
        for other in children:
            for dst in other:
                seg = _overlap(old[me], stage.spans[dst])
                if dst != me and seg[1] > seg[0]:
                    sends.append((dst, seg))
        return _Plan(ci, tuple(recvs), tuple(sends))
    return None


class _Scratch:
    """A grow-only float32 receive buffer reused across calls (no page faults per frame)."""

    def __init__(self) -> None:
        self.buf = np.empty(0, np.float32)

    def get(self, n: int) -> np.ndarray:
        if self.buf.size < n:
            self.buf = np.empty(n, np.float32)
        return self.buf[:n]


_SCRATCH = _Scratch()


def _blend_received(
    buf: np.ndarray, plan: _Plan, slots: list[np.ndarray], wait: Any
) -> tuple[float, int]:
    """Blend the received pieces into ``buf`` in depth order: (seconds blending, pixels).

    ``buf`` holds my own child's data over my old piece. First the rest of my child's
    composite is copied in, then children behind are blended under it (front to back) and
    children in front over it (back to front), so each result is front-over-back.
    """
    blend, pixels = 0.0, 0
    recvs = plan.recvs
    own = [i for i in range(len(recvs)) if recvs[i][0] == plan.child]
    behind = sorted((i for i in range(len(recvs)) if recvs[i][0] > plan.child),
                    key=lambda i: (recvs[i][0], i))  # fmt: skip
    front = sorted((i for i in range(len(recvs)) if recvs[i][0] < plan.child),
                   key=lambda i: (-recvs[i][0], i))  # fmt: skip
    for i in own:
        wait(i)
        lo, hi = plan.recvs[i][2]
        buf[4 * lo : 4 * hi] = slots[i]
    for i in behind:
        wait(i)
        lo, hi = plan.recvs[i][2]
        t = time.perf_counter()
        under_into_front(buf[4 * lo : 4 * hi], slots[i])
        blend += time.perf_counter() - t
        pixels += hi - lo
    for i in front:
        wait(i)
        lo, hi = plan.recvs[i][2]
        t = time.perf_counter()
        over_into_back(slots[i], buf[4 * lo : 4 * hi])
        blend += time.perf_counter() - t
        pixels += hi - lo
    return blend, pixels


# ------------------------------------------------------------------------ public calls


def _flat(image: np.ndarray) -> np.ndarray:
    if image.dtype != np.float32 or image.shape[-1] != 4 or not image.flags.c_contiguous:
        raise ValueError(
            f"compositing needs a C-contiguous float32 (..., 4) RGBA image, got "
            f"{image.dtype} {image.shape}"
        )
    return image.reshape(-1)


def _check_order(order: Sequence[int], size: int) -> list[int]:
    order = [int(r) for r in order]
    if sorted(order) != list(range(size)):
        raise ValueError(f"visibility order must be a permutation of 0..{size - 1}, got {order}")
    return order


def composite(
    image: np.ndarray,
    order: Sequence[int],
    algorithm: str = "radix-k",
    comm: Any = None,
    k: int = 8,
    root: int = 0,
    chunk_pixels: int = CHUNK_PIXELS,
) -> CompositeResult:
    """Composite every rank's premultiplied RGBA ``image`` in visibility ``order``; gather to root.

    ``image``: this rank's full-size C-contiguous float32 (..., 4) image; it is used as the
    working buffer and overwritten (on the root it becomes the returned final image).
    ``order``: rank ids front to back, the same list on every rank. Collective: every rank
    of ``comm`` (default ``COMM_WORLD``) must call it with the same order, algorithm and
    image shape. Messages are cut into pieces of ``chunk_pixels`` (0: whole), each blended
    as soon as it arrives. Returns the final image on ``root`` (None elsewhere) and this
    rank's per-stage timings.
    """
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    size, rank = comm.Get_size(), comm.Get_rank()
    order = _check_order(order, size)
    flat = _flat(image)
    npix = flat.size // 4
    stages = schedule(algorithm, size, npix, k)
    me = order.index(rank)
    t_start = time.perf_counter()
    timings: list[StageTiming] = []
    spans: Sequence[Span] = ((0, npix),) * size
    for si, stage in enumerate(stages):
        t0 = time.perf_counter()
        timing = StageTiming(stage.name)
        plan = _plan(stage, spans, me)
        if plan is not None:
            plan = _chunked(plan, chunk_pixels)
            tag = TAG_BASE + si
            total = sum(4 * (s[1] - s[0]) for _, _, s in plan.recvs)
            scratch = _SCRATCH.get(total)
            slots, recv_reqs, off = [], [], 0
            for _, src, (lo, hi) in plan.recvs:
                slot = scratch[off : off + 4 * (hi - lo)]
                off += slot.size
                slots.append(slot)
                recv_reqs.append(comm.Irecv([slot, MPI.FLOAT], source=order[src], tag=tag))
                timing.bytes_received += slot.nbytes
            send_reqs = []
            for dst, (lo, hi) in plan.sends:
                piece = flat[4 * lo : 4 * hi]
                send_reqs.append(comm.Isend([piece, MPI.FLOAT], dest=order[dst], tag=tag))
                timing.bytes_sent += piece.nbytes
            timing.partners = sorted(
                {order[s] for _, s, _ in plan.recvs} | {order[d] for d, _ in plan.sends}
            )
            timing.blend_seconds, timing.blended_pixels = _blend_received(
                flat, plan, slots, lambda i, reqs=recv_reqs: reqs[i].Wait()
            )
            MPI.Request.Waitall(send_reqs)
        timing.seconds = time.perf_counter() - t0
        timings.append(timing)
        spans = stage.spans
    gather = _gather(comm, flat, spans, order, rank, root)
    out = image if rank == root else None
    return CompositeResult(out, timings, gather, time.perf_counter() - t_start, algorithm)


def _gather(
    comm: Any, flat: np.ndarray, spans: Sequence[Span], order: list[int], rank: int, root: int
) -> StageTiming:
    """Gatherv every rank's final piece into the root's buffer, in place on the root."""
    from mpi4py import MPI

    t0 = time.perf_counter()
    timing = StageTiming("gather")
    size = len(order)
    counts = [0] * size
    displs = [0] * size
    for v, (lo, hi) in enumerate(spans):
        counts[order[v]] = 4 * (hi - lo)
        displs[order[v]] = 4 * lo
    lo, hi = spans[order.index(rank)]
    if size > 1:
        if rank == root:
            comm.Gatherv(MPI.IN_PLACE, [flat, counts, displs, MPI.FLOAT], root=root)
            timing.bytes_received = 4 * (sum(counts) - counts[root])
            timing.partners = [r for r in range(size) if r != root and counts[r]]
        else:
            comm.Gatherv([flat[4 * lo : 4 * hi], MPI.FLOAT], None, root=root)
            timing.bytes_sent = 16 * (hi - lo)
            timing.partners = [root] if hi > lo else []
    timing.seconds = time.perf_counter() - t0
    return timing


def composite_serial(
    images_by_rank: Sequence[np.ndarray], order: Sequence[int], algorithm: str, k: int = 8
) -> np.ndarray:
    """Run ``algorithm``'s schedule in one process on copies of every rank's image.

    Same stages, same blending as :func:`composite`, without MPI: checks schedules quickly
    and gives the exact reference the MPI run must reproduce.
    """
    size = len(images_by_rank)
    order = _check_order(order, size)
    bufs = [_flat(np.ascontiguousarray(images_by_rank[r], np.float32)).copy() for r in order]
    npix = bufs[0].size // 4
    spans: Sequence[Span] = ((0, npix),) * size
    for stage in schedule(algorithm, size, npix, k):
        snapshot = [b.copy() for b in bufs]
        for me in range(size):
            plan = _plan(stage, spans, me)
            if plan is None:
                continue
            slots = [snapshot[src][4 * lo : 4 * hi].copy() for _, src, (lo, hi) in plan.recvs]
            _blend_received(bufs[me], plan, slots, lambda i: None)
        spans = stage.spans
    out = np.empty(npix * 4, np.float32)
    for v, (lo, hi) in enumerate(spans):
        out[4 * lo : 4 * hi] = bufs[v][4 * lo : 4 * hi]
    return out.reshape(np.shape(images_by_rank[0]))
