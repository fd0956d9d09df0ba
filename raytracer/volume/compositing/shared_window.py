"""The shared-memory transport: ranks on one node composite in place in an MPI-3 shared window.

Why: on one node, a message moves a span through MPICH's shared cells (a copy in, a copy
out into the receive buffer) before it is blended, and ``Gatherv`` copies twice again.
When every rank's working image lies in one shared window, a stage blends a peer's span
straight from the peer's memory into its own, and the gather is each rank writing its final
span into the root's image: a byte that crosses ranks is read once, and no receive buffer
is needed. ``autotune bench compositing`` measures it against the messages' transport.

What: :class:`SharedImages` is one communicator's window (``MPI.Win.Allocate_shared`` on
its ranks, which must share a node): one slot per rank, big enough for a full image,
grow-only and reused by every frame (its pages are faulted in once). A renderer renders
into its slot (:func:`~.engine.composite_buffer`); :func:`~.engine.composite` then works
there without a copy, and the root's final image is its slot. :func:`shared_images` decides
once per communicator whether the window can be used (a real MPI communicator, not a
wrapper such as the emulated network ``emulation.SlowLinks``, whose ``Split_type`` by
``COMM_TYPE_SHARED`` keeps every rank) and caches the answer on the communicator as an MPI
attribute: the window is freed when the communicator is freed, or at exit just before
mpi4py's ``MPI_Finalize`` (an ``atexit`` hook; the delete callback of an attribute on
``COMM_SELF``, MPI's own hook for this, did not run under mpi4py here), never in the middle
of a frame.

Synchronisation (:meth:`SharedImages.sync`: ``Win_sync``, a barrier of the node's ranks,
``Win_sync``; about 3 µs here): one before each stage, one before the gather's writes and one
after them. Within a stage a rank writes only its new span and reads its peers' slots only
over that span, and the schedules give the ranks of a group disjoint new spans, so nothing
a rank writes is read by another in the same stage; the sync before the next stage orders
every read of a stage before every write of the next (which may cover what was read), and
the sync before the gather lets a rank write into the root's slot only once nobody reads it.
The sync after the gather lets no rank render into its slot while the root's image is
still being written.
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from raytracer.volume.compositing.base import Span, StageTiming

TRANSPORTS = ("auto", "messages", "shared")


class SharedImages:
    """One communicator's shared window: every rank's working image, readable by all ranks.

    ``node``: the communicator's ranks, all on one node, in the same order (rank ``r`` of
    ``node`` is rank ``r`` of the communicator). Every method but :meth:`holds` and
    :meth:`span` is collective.
    """

    def __init__(self, node: Any) -> None:
        self.node = node
        self.rank = node.Get_rank()
        self.win: Any = None
        self.slots: list[np.ndarray] = []

    def slot(self, floats: int) -> np.ndarray:
        """This rank's slot, its first ``floats`` float32 values.

        The window grows when a bigger image is asked for, which frees the old one: an array
        from an earlier call must not be used after a call with a bigger image."""
        if not self.slots or self.slots[0].size < floats:
            self._allocate(floats)
        return self.slots[self.rank][:floats]

    def _allocate(self, floats: int) -> None:
        from mpi4py import MPI  # lazy: importing it initialises MPI

        self.free()
        self.win = MPI.Win.Allocate_shared(4 * floats, 4, comm=self.node)
        self.win.Lock_all(MPI.MODE_NOCHECK)
        self.slots = [
            np.frombuffer(self.win.Shared_query(r)[0], np.float32, floats)
            for r in range(self.node.Get_size())
        ]
        self.slots[self.rank].fill(0.0)  # fault the pages in now, not in the first frame
        self.sync()

    def holds(self, flat: np.ndarray) -> bool:
        """Whether ``flat`` is (the start of) this rank's slot."""
        if not self.slots:
            return False
        mine = self.slots[self.rank]
        return flat.size <= mine.size and flat.ctypes.data == mine.ctypes.data

    def all_hold(self, flat: np.ndarray) -> bool:
        """Whether every rank's image is (the start of) its slot: the window can be used."""
        from mpi4py import MPI  # lazy: importing it initialises MPI

        flags = np.array([self.holds(flat)], np.int32)
        every = np.empty_like(flags)
        self.node.Allreduce(flags, every, op=MPI.MIN)
        return bool(every[0])

    def sync(self) -> None:
        """Memory barrier of the node's ranks: every write before it is seen after it."""
        self.win.Sync()
        self.node.Barrier()
        self.win.Sync()

    def span(self, rank: int, span: Span) -> np.ndarray:
        """Rank ``rank``'s image over ``span``, read in place."""
        lo, hi = span
        return self.slots[rank][4 * lo : 4 * hi]

    def gather(self, spans: Sequence[Span], order: list[int], root: int) -> StageTiming:
        """Every rank writes its final piece (``spans`` by virtual rank) into the root's image."""
        t0 = time.perf_counter()
        timing = StageTiming("gather")
        lo, hi = spans[order.index(self.rank)]
        self.sync()
        if self.rank != root and hi > lo:
            self.span(root, (lo, hi))[:] = self.span(self.rank, (lo, hi))
            timing.bytes_sent = 16 * (hi - lo)
            timing.partners = [root]
        if self.rank == root:
            pieces = [(order[v], s) for v, s in enumerate(spans) if order[v] != root]
            timing.partners = sorted(r for r, (a, b) in pieces if b > a)
            timing.bytes_received = sum(16 * (b - a) for _, (a, b) in pieces)
        self.sync()
        timing.seconds = time.perf_counter() - t0
        return timing

    def free(self) -> None:
        """Free the window; the slots are gone."""
        if self.win is not None:
            self.slots = []
            self.win.Unlock_all()
            self.win.Free()
            self.win = None


_KEYVAL: int | None = None  # attribute key: a communicator's SharedImages, or False
_LIVE: list[SharedImages] = []  # windows not yet freed, in creation order (the same on all ranks)


def _release(shared: SharedImages) -> None:
    shared.free()
    shared.node.Free()
    _LIVE.remove(shared)


def _delete(comm: Any, keyval: int, shared: SharedImages | bool) -> None:
    """Attribute delete callback: the communicator is being freed, so is its window."""
    if isinstance(shared, SharedImages):
        _release(shared)


def _free_all() -> None:
    """At exit, before mpi4py's ``MPI_Finalize`` (registered after it): free every window left."""
    from mpi4py import MPI  # lazy: importing it initialises MPI

    if not MPI.Is_finalized():
        for shared in list(_LIVE):
            _release(shared)


def shared_images(comm: Any, transport: str = "auto") -> SharedImages | None:
    """The window of ``comm`` (None: composite by messages); collective the first time on a
    communicator, unless ``transport`` is "messages".

    "auto": the window where every rank of ``comm`` shares one node (decided once per
    communicator), else None; "shared": the window, or ValueError where it cannot be used;
    "messages": None.
    """
    global _KEYVAL
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown compositing transport {transport!r}; choose from {TRANSPORTS}")
    if transport == "messages" or comm.Get_size() == 1:
        return None
    from mpi4py import MPI  # lazy: importing it initialises MPI

    shared: SharedImages | bool = False
    if isinstance(comm, MPI.Intracomm):
        if _KEYVAL is None:
            _KEYVAL = MPI.Comm.Create_keyval(delete_fn=_delete)
            atexit.register(_free_all)
        shared = comm.Get_attr(_KEYVAL)
        if shared is None:
            node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
            if node.Get_size() == comm.Get_size():
                shared = SharedImages(node)
                _LIVE.append(shared)
            else:
                node.Free()
                shared = False
            comm.Set_attr(_KEYVAL, shared)
    if shared is False and transport == "shared":
        raise ValueError(
            "the shared transport needs an MPI communicator whose ranks all share one node"
        )
    return shared or None
