"""The engine that runs any schedule: one rank's stage over MPI, the gather, the serial twin.

A stage and the gather run by messages, or in the shared window of :mod:`.shared_window`
where every rank shares a node and rendered into :func:`composite_buffer`.

Ranks are renumbered by their position in the visibility order ("virtual ranks") before a
schedule is used, so every group always holds a contiguous depth range and blending respects
which side is in front for any order, not only rank order.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from raytracer.volume.compositing.base import CompositeResult, Span, Stage, StageTiming, overlap
from raytracer.volume.compositing.schedules import schedule
from raytracer.volume.compositing.shared_window import SharedImages, shared_images
from raytracer.volume.span_blend import over_into_back, under_into_front

TAG_BASE = 7100  # message tags: TAG_BASE + stage index
CHUNK_PIXELS = 0  # 0: whole messages (1 MiB pieces blended on arrival measured no faster here)


def stage_partners(
    algorithm: str, order: Sequence[int], npix: int, k: int = 8
) -> list[list[list[int]]]:
    """``partners[rank][stage]``: the real ranks each rank exchanges with in each stage
    (what :class:`StageTiming.partners` records), computed from the schedule alone."""
    size = len(order)
    order = check_order(order, size)
    out: list[list[list[int]]] = [[] for _ in range(size)]
    spans: Sequence[Span] = ((0, npix),) * size
    for stage in schedule(algorithm, size, npix, k):
        for me in range(size):
            plan = plan_stage(stage, spans, me)
            out[order[me]].append([] if plan is None else _partners(plan, order))
        spans = stage.spans
    return out


@dataclass(frozen=True)
class StagePlan:
    """What one virtual rank receives and sends in one stage."""

    child: int  # index of my child in the group
    recvs: tuple[tuple[int, int, Span], ...]  # (child index, source virtual rank, span)
    sends: tuple[tuple[int, Span], ...]  # (destination virtual rank, span)


def _chunks(span: Span, chunk: int) -> list[Span]:
    lo, hi = span
    return [(a, min(a + chunk, hi)) for a in range(lo, hi, chunk)]


def _chunked(plan: StagePlan, chunk: int) -> StagePlan:
    """The same plan with every message cut into pieces of at most ``chunk`` pixels.

    Sender and receiver cut the same segment the same way and MPI keeps the order of
    messages between two ranks, so the pieces match. Each piece is blended as soon as it
    has arrived, while it is still in cache.
    """
    if chunk <= 0:
        return plan
    recvs = tuple((c, src, piece) for c, src, seg in plan.recvs for piece in _chunks(seg, chunk))
    sends = tuple((dst, piece) for dst, seg in plan.sends for piece in _chunks(seg, chunk))
    return StagePlan(plan.child, recvs, sends)


def plan_stage(stage: Stage, old: Sequence[Span], me: int) -> StagePlan | None:
    """What virtual rank ``me`` receives and sends in ``stage`` (None: not in a group)."""
    for children in stage.groups:
        ci = next((i for i, child in enumerate(children) if me in child), None)
        if ci is None:
            continue
        mine = stage.spans[me]
        recvs = []
        for cj, other in enumerate(children):
            for src in other:
                seg = overlap(old[src], mine)
                if src != me and seg[1] > seg[0]:
                    recvs.append((cj, src, seg))
        sends = []
        for other in children:
            for dst in other:
                seg = overlap(old[me], stage.spans[dst])
                if dst != me and seg[1] > seg[0]:
                    sends.append((dst, seg))
        return StagePlan(ci, tuple(recvs), tuple(sends))
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
    buf: np.ndarray, plan: StagePlan, slots: list[np.ndarray], wait: Any
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


def _flat(image: np.ndarray) -> np.ndarray:
    if image.dtype != np.float32 or image.shape[-1] != 4 or not image.flags.c_contiguous:
        raise ValueError(
            f"compositing needs a C-contiguous float32 (..., 4) RGBA image, got "
            f"{image.dtype} {image.shape}"
        )
    return image.reshape(-1)


def check_order(order: Sequence[int], size: int) -> list[int]:
    """``order`` as a list of ints, if it is a permutation of the ranks 0..size-1."""
    order = [int(r) for r in order]
    if sorted(order) != list(range(size)):
        raise ValueError(f"visibility order must be a permutation of 0..{size - 1}, got {order}")
    return order


def composite_buffer(
    shape: tuple[int, ...], comm: Any = None, transport: str = "auto"
) -> np.ndarray:
    """A float32 array of ``shape`` (..., 4) to render this rank's image into before
    :func:`composite` (collective: same shape and transport on every rank).

    Where the shared transport can run it is this rank's slot of the shared window, which
    :func:`composite` works in without a copy (on the root it becomes the final image); it is
    the same memory on every call, valid until a call with a bigger image on the same
    communicator. Else a new array.
    """
    from mpi4py import MPI  # lazy: importing it initialises MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    shared = shared_images(comm, transport)
    if shared is None:
        return np.empty(shape, np.float32)
    return shared.slot(int(np.prod(shape))).reshape(shape)


def composite(
    image: np.ndarray,
    order: Sequence[int],
    algorithm: str = "radix-k",
    comm: Any = None,
    k: int = 8,
    root: int = 0,
    chunk_pixels: int = CHUNK_PIXELS,
    transport: str = "auto",
) -> CompositeResult:
    """Composite every rank's premultiplied RGBA ``image`` in visibility ``order``; gather to root.

    ``image``: this rank's full-size C-contiguous float32 (..., 4) image; it is used as the
    working buffer and overwritten (on the root it becomes the returned final image).
    ``order``: rank ids front to back, the same list on every rank. Collective: every rank
    of ``comm`` (default ``COMM_WORLD``) must call it with the same order, algorithm,
    transport and image shape. ``transport``: "messages" (Isend/Irecv, ``Gatherv``; messages
    are cut into pieces of ``chunk_pixels``, 0: whole, each blended as soon as it arrives),
    "shared" (in place in an MPI-3 shared window, :mod:`.shared_window`: the ranks share a
    node and every image comes from :func:`composite_buffer`, else ValueError on every rank)
    or "auto" (shared where it can run, else messages). Returns the final image on ``root``
    (None elsewhere) and this rank's per-stage timings.
    """
    from mpi4py import MPI  # lazy: importing it initialises MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    size, rank = comm.Get_size(), comm.Get_rank()
    order = check_order(order, size)
    flat = _flat(image)
    npix = flat.size // 4
    stages = schedule(algorithm, size, npix, k)
    shared = shared_images(comm, transport)
    me = order.index(rank)
    t_start = time.perf_counter()
    if shared is not None and not shared.all_hold(flat):
        if transport == "shared":
            raise ValueError("the shared transport composites images from composite_buffer")
        shared = None
    timings: list[StageTiming] = []
    spans: Sequence[Span] = ((0, npix),) * size
    for si, stage in enumerate(stages):
        t0 = time.perf_counter()
        timing = StageTiming(stage.name)
        plan = plan_stage(stage, spans, me)
        if shared is not None:
            _shared_stage(shared, flat, plan, order, timing)
        elif plan is not None:
            _message_stage(comm, flat, _chunked(plan, chunk_pixels), order, TAG_BASE + si, timing)
        timing.seconds = time.perf_counter() - t0
        timings.append(timing)
        spans = stage.spans
    if shared is not None:
        gather = shared.gather(spans, order, root)
    else:
        gather = _gather(comm, flat, spans, order, rank, root)
    out = image if rank == root else None
    used = "messages" if shared is None else "shared"
    return CompositeResult(
        out, timings, gather, time.perf_counter() - t_start, algorithm, transport=used
    )


def _partners(plan: StagePlan, order: Sequence[int]) -> list[int]:
    """The real ranks a stage plan exchanges with (receives from or sends to), sorted."""
    return sorted({order[s] for _, s, _ in plan.recvs} | {order[d] for d, _ in plan.sends})


def _message_stage(
    comm: Any, flat: np.ndarray, plan: StagePlan, order: list[int], tag: int, timing: StageTiming
) -> None:
    """One stage by Isend/Irecv: receive every span into scratch, blend each on arrival."""
    from mpi4py import MPI  # lazy: importing it initialises MPI

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
    timing.partners = _partners(plan, order)
    timing.blend_seconds, timing.blended_pixels = _blend_received(
        flat, plan, slots, lambda i: recv_reqs[i].Wait()
    )
    MPI.Request.Waitall(send_reqs)


def _shared_stage(
    shared: SharedImages,
    flat: np.ndarray,
    plan: StagePlan | None,
    order: list[int],
    timing: StageTiming,
) -> None:
    """One stage in the window (collective: every rank, in a group or not): sync, then blend
    each peer's span into mine straight from the peer's slot."""
    shared.sync()
    if plan is None:
        return
    sources = [shared.span(order[src], span) for _, src, span in plan.recvs]
    timing.bytes_received = sum(s.nbytes for s in sources)
    timing.bytes_sent = sum(16 * (hi - lo) for _, (lo, hi) in plan.sends)
    timing.partners = _partners(plan, order)
    timing.blend_seconds, timing.blended_pixels = _blend_received(
        flat, plan, sources, lambda i: None
    )


def _gather(
    comm: Any, flat: np.ndarray, spans: Sequence[Span], order: list[int], rank: int, root: int
) -> StageTiming:
    """Gatherv every rank's final piece into the root's buffer, in place on the root."""
    from mpi4py import MPI  # lazy: importing it initialises MPI

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
    order = check_order(order, size)
    bufs = [_flat(np.ascontiguousarray(images_by_rank[r], np.float32)).copy() for r in order]
    npix = bufs[0].size // 4
    spans: Sequence[Span] = ((0, npix),) * size
    for stage in schedule(algorithm, size, npix, k):
        snapshot = [b.copy() for b in bufs]
        for me in range(size):
            plan = plan_stage(stage, spans, me)
            if plan is None:
                continue
            slots = [snapshot[src][4 * lo : 4 * hi].copy() for _, src, (lo, hi) in plan.recvs]
            _blend_received(bufs[me], plan, slots, lambda i: None)
        spans = stage.spans
    out = np.empty(npix * 4, np.float32)
    for v, (lo, hi) in enumerate(spans):
        out[4 * lo : 4 * hi] = bufs[v][4 * lo : 4 * hi]
    return out.reshape(np.shape(images_by_rank[0]))
