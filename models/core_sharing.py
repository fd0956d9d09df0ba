"""How ranks that share a machine's cores finish their renders: processor sharing, by core
group where they are pinned, and on which devices the ranks share cores at all. Pure numbers,
used by the per-rank volume model (models.volume_cost) and whoever sets its predictions
against a frame's measured render times."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray


def shares_cores(device_kind: str) -> bool:
    """Whether ranks rendering on a ``device_kind`` OpenCL device share CPU cores, so that the
    core-sharing terms apply (:func:`shared_finish`'s processor sharing, the threads a rank's
    work is divided by, the core groups, and a core's L2 as the cache of the streamed share):
    only on a CPU device. On a GPU a rank's render is kernel time on the device (its events'
    seconds), which the host cores only launch: sharing them does not slow it."""
    return device_kind == "CPU"


def shared_finish(work: ArrayLike, cores: float, threads: float = 1.0,
                  core_groups: Sequence[int] = ()) -> NDArray:
    """Finish time of each rank's local render when ranks share ``cores`` cores fairly.

    ``work``: (ranks, candidates) CPU seconds; each rank runs ``threads`` threads, so with n
    ranks still busy each progresses at ``min(threads, cores / n)`` CPU seconds per second
    (processor sharing): a rank that finishes early hands its core to the others. With a core
    or more per thread (a real cluster) this is work / threads, and the frame's render is the
    slowest rank's, as the HemoCell study aggregates; on an oversubscribed node it is not.
    ``core_groups``: each rank's group where ranks are pinned (the ranks of a group share
    its cores, ``cores / groups`` of them, and only those: 4 ranks pinned round robin on 2
    cores, bonsai at 256², the slowest rank's wall time from its CPU time 8.6 % off shared
    by all, 5.4 % by group); () for ranks the OS moves between all the cores.
    """
    w = np.atleast_2d(np.asarray(work, np.float64))
    ranks = w.shape[0]
    if len(core_groups):
        groups = np.asarray(core_groups)
        if groups.shape != (ranks,):
            raise ValueError(f"expected one core group per rank ({ranks}), got "
                             f"{groups.tolist()}")
        out = np.empty_like(w)
        names = np.unique(groups)
        for g in names:
            out[groups == g] = shared_finish(w[groups == g], cores / len(names), threads)
        return out
    if cores >= ranks * threads:  # every thread has its own core: nothing is shared
        return w / threads
    order = np.argsort(w, axis=0, kind="stable")
    sorted_w = np.take_along_axis(w, order, axis=0)
    active = ranks - np.arange(ranks)  # ranks still busy while the k-th smallest finishes
    rate = np.minimum(threads, cores / active)[:, None]
    steps = np.diff(sorted_w, axis=0, prepend=0.0) / rate
    finish_sorted = np.cumsum(steps, axis=0)
    out = np.empty_like(w)
    np.put_along_axis(out, order, finish_sorted, axis=0)
    return out
