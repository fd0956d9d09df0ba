"""Core pinning: the ranks on one machine split its cores, or per-rank timings mean nothing."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

from raytracer.device.runtimes import COMPUTE_UNITS_ENV, limit_cpu_threads
from raytracer.mpi.faults import comm_or_world


def affinity() -> set[int]:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def cpu_cores() -> int:
    """How many cores this process may run on."""
    return len(affinity())


@dataclass(frozen=True)
class NodeShare:
    """How the ranks on one machine share its cores (what :func:`share_node` found and did)."""

    cores: int  # the machine's cores open to its ranks (the union of their affinity masks)
    ranks: int  # ranks of the communicator on this machine
    threads: int  # this rank's share: its OpenCL CPU device's threads
    pinned: tuple[int, ...] = ()  # the cores this rank was pinned to; () where left as launched

    @property
    def oversubscribed(self) -> bool:
        """More ranks than cores on this machine: they take turns on the cores."""
        return self.ranks > self.cores


def share_node(comm: Any = None, cores: int | None = None, environ: Any = None,
               apply: bool = True) -> NodeShare:
    """Collective: split this machine's cores between the ranks of ``comm`` on it.

    Each rank's OpenCL CPU device gets ``max(1, cores // ranks)`` threads
    (``AUTOTUNE_COMPUTE_UNITS`` and each CPU runtime's own limit,
    :func:`raytracer.device.runtimes.limit_cpu_threads`). Where the launcher left every rank
    free to run on all the cores (hydra's default), each rank is also pinned, as ``mpiexec
    -bind-to core`` does: to its own slice of the cores where there are no more ranks than
    cores, else rank r to core r mod cores. Unpinned, the OS runs ranks and their runtimes'
    threads on each other's cores (2 ranks on 2 cores, bonsai at 256²: 11 % of the per-rank
    render times ran over 15 % past their CPU time; pinned here, 1.4 %; pinned by ``mpiexec
    -bind-to core``, 0.7 %); oversubscribed it is worse (4 ranks on 2 cores, bonsai at 256²:
    one view at fixed knobs strayed 26 % from its median, pinned round robin 4.5-7 %, and
    frames took 2.4x less). Call it before
    the first OpenCL platform query (threads started later inherit the pinning; the runtimes
    read their limits once); importing pyopencl is fine. ``cores`` names the machine's core
    count instead (nothing is pinned then); ``apply=False`` only reports the share, changing
    nothing.
    """
    from mpi4py import MPI  # lazy: importing it initialises MPI

    comm = comm_or_world(comm)
    environ = os.environ if environ is None else environ
    mine = sorted(affinity())
    node_rank, masks = 0, [mine]
    if comm.Get_size() > 1:
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            node_rank, masks = node.Get_rank(), node.allgather(mine)
        finally:
            node.Free()
    ranks = len(masks)
    pinned: tuple[int, ...] = ()
    if cores is None:
        union = sorted(set().union(*masks))
        cores = len(union)
        if apply and ranks > 1 and all(m == union for m in masks):
            if ranks <= cores:
                per = cores // ranks
                pinned = tuple(union[node_rank * per : (node_rank + 1) * per])
            else:
                pinned = (union[node_rank % cores],)
            with contextlib.suppress(AttributeError, OSError):
                os.sched_setaffinity(0, pinned)
    threads = max(1, cores // ranks)
    if apply:
        environ[COMPUTE_UNITS_ENV] = str(threads)
        limit_cpu_threads(environ)
    return NodeShare(cores, ranks, threads, pinned)
