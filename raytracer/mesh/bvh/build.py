"""``build_bvh``: the binned-SAH binary tree built in parallel, then collapsed to 8 wide.

Per-triangle boxes are copied into one contiguous (F, 8) array that is partitioned in place
with the triangle ids (how a node is split: :mod:`raytracer.mesh.bvh.sah`). Nodes above
``F / (4 * threads)`` triangles are built one at a time with the binning spread over all
threads (``TOP_BINS`` bins per axis); the subtrees below are then built in parallel
(``prange``, ``BINS`` bins per axis), each writing its nodes into its own slots
``[base + 2*start, base + 2*end)`` of a shared array (a subtree of m triangles has at most
2m - 1 nodes). Both phases pop work items off a stack and decide each with the same step
(:func:`_step`). The binary tree is then collapsed to the flat 8-wide layout
(:func:`raytracer.mesh.bvh.collapse.finish_bvh`). The build's arrays are allocated by numpy and
filled by the jitted passes, not allocated inside them: numpy advises the kernel to back large
arrays with huge pages, where numba's allocator takes 4 KiB pages, each faulted in on its
first write (the dragon: 7,500 faults and 18-34 ms of system time per build on a 2-core VM;
the build 1.09x / 1.22x faster, median / best of 25, the same tree).
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numba as nb
import numpy as np

from common.jit_cache import compiled_before, njit
from raytracer.mesh.bvh.checks import checked_triangles
from raytracer.mesh.bvh.collapse import finish_bvh
from raytracer.mesh.bvh.layout import BVH, STACK
from raytracer.mesh.bvh.sah import ITEM_F, bin_parallel, bin_scale, split_node, workspace

log = logging.getLogger(__name__)

BINS = 16  # bins per axis below the top phase
TOP_BINS = 64  # bins per axis in the (few, big) top-phase nodes
TASKS_PER_THREAD = 4  # subtrees of at most F / (4 * threads) triangles are built in parallel
MIN_TASK_TRIS = 2048  # ... but never split the top phase below this many triangles per task
PAR_BIN_MIN = 32768  # top-phase nodes with more triangles bin in parallel chunks


@njit(parallel=True)
def _prepare(tris, threads, box, ids):
    """(F,3,3) corners -> (F,8) boxes ``lo.xyz, 0, hi.xyz, 0`` and identity ids (into ``box``
    and ``ids``); returns the root bounds."""
    n = tris.shape[0]
    chunks = max(1, min(4 * threads, n // 4096))
    part = np.empty((chunks, 12), np.float32)  # node lo/hi, doubled-centroid lo/hi
    for c in nb.prange(chunks):
        s = c * n // chunks
        e = (c + 1) * n // chunks
        r = np.empty(12, np.float32)
        for a in range(3):
            r[a] = r[6 + a] = np.inf
            r[3 + a] = r[9 + a] = -np.inf
        for k in range(s, e):
            ids[k] = k
            for a in range(3):
                x0, x1, x2 = tris[k, 0, a], tris[k, 1, a], tris[k, 2, a]
                lo = min(x0, min(x1, x2))
                hi = max(x0, max(x1, x2))
                box[k, a] = lo
                box[k, 4 + a] = hi
                cc = lo + hi
                r[a] = min(r[a], lo)
                r[3 + a] = max(r[3 + a], hi)
                r[6 + a] = min(r[6 + a], cc)
                r[9 + a] = max(r[9 + a], cc)
            box[k, 3] = 0.0
            box[k, 7] = 0.0
        part[c] = r
    root = part[0].copy()
    for c in range(1, chunks):
        for a in range(3):
            root[a] = min(root[a], part[c, a])
            root[3 + a] = max(root[3 + a], part[c, 3 + a])
            root[6 + a] = min(root[6 + a], part[c, 6 + a])
            root[9 + a] = max(root[9 + a], part[c, 9 + a])
    return root


@njit()
def _stack(item_i, item_f):
    """A work stack (ints, floats) of ``STACK`` entries holding one item."""
    st_i = np.empty((STACK, 4), np.int64)
    st_f = np.empty((STACK, ITEM_F), np.float32)
    st_i[0] = item_i
    st_f[0] = item_f
    return st_i, st_f


@njit()
def _root_item(root, n_tris):
    """The work item of the whole tree (node 0, triangles 0..n_tris-1, depth 0) from
    :func:`_prepare`'s root bounds."""
    item_i = np.zeros(4, np.int64)
    item_i[2] = n_tris
    item_f = np.zeros(ITEM_F, np.float32)
    for c in range(3):
        item_f[c] = root[c]
        item_f[4 + c] = root[3 + c]
        item_f[8 + c] = root[6 + c]
        item_f[11 + c] = root[9 + c]
    return item_i, item_f


@njit()
def _pop(stack, sp, item_f):
    """Stack entry ``sp``: its floats copied into ``item_f``, its ints returned (node, start,
    end, depth)."""
    st_i, st_f = stack
    for c in range(ITEM_F):
        item_f[c] = st_f[sp, c]
    return st_i[sp, 0], st_i[sp, 1], st_i[sp, 2], st_i[sp, 3]


@njit()
def _step(box, ids, item, leaf_size, work, binned, tree, stack, sp, left):
    """Decide the popped ``item`` (its floats in ``work``, see :func:`split_node`): store its
    box as its node's, then make the node a leaf, or inner with children ``left``, ``left + 1``
    pushed (right first, so the left subtree is built next: depth-first node order). Returns
    the stack size: ``sp`` after a leaf, ``sp + 2`` after a split."""
    node, s, e, depth = item
    node_box, node_first, node_count = tree
    st_i, st_f = stack
    item_f, out_f = work[6], work[7]
    for c in range(8):
        node_box[node, c] = item_f[c]
    mid = split_node(box, ids, s, e, depth, leaf_size, work, binned)
    if mid < 0:
        node_first[node] = s
        node_count[node] = e - s
    else:
        node_first[node] = left
        node_count[node] = 0
        st_i[sp, 0], st_i[sp, 1], st_i[sp, 2], st_i[sp, 3] = left + 1, mid, e, depth + 1
        for c in range(ITEM_F):
            st_f[sp, c] = out_f[ITEM_F + c]
            st_f[sp + 1, c] = out_f[c]
        st_i[sp + 1, 0], st_i[sp + 1, 1], st_i[sp + 1, 2], st_i[sp + 1, 3] = left, s, mid, depth + 1
        sp += 2
    return sp


@njit()
def _build_subtree(box, ids, root_i, root_f, leaf_size, tree, slot0):
    """Sequential binned-SAH build below one work item; new nodes go to slots from slot0.
    Returns the deepest node's depth."""
    work = workspace(BINS)
    stack = _stack(root_i, root_f)
    sp = 1
    slot = slot0
    max_depth = 0
    while sp > 0:
        sp -= 1
        item = _pop(stack, sp, work[6])
        max_depth = max(max_depth, item[3])
        pushed = _step(box, ids, item, leaf_size, work, False, tree, stack, sp, slot)
        slot += pushed - sp
        sp = pushed
    return max_depth


@njit()
def _task_cap(n_tris, task_max):
    """Most subtree tasks the top phase may hand out (then it stops splitting)."""
    return 2 * (n_tris // max(task_max, 1)) + 64


@njit()
def _build_top(box, ids, root_i, root_f, leaf_size, task_max, tree, threads):
    """Sequential top phase: splits nodes above task_max, returns the subtrees left to build."""
    work = workspace(TOP_BINS)
    cnt, bins, scale, cmin, item_f = work[0], work[1], work[4], work[5], work[6]
    cap = _task_cap(box.shape[0], task_max)
    tasks_i = np.empty((cap, 4), np.int64)
    tasks_f = np.empty((cap, ITEM_F), np.float32)
    n_tasks = 0
    stack = _stack(root_i, root_f)
    sp = 1
    n_nodes = np.int64(1)  # not the literal 1: that would compile _step a second time
    while sp > 0:
        sp -= 1
        item = _pop(stack, sp, item_f)
        s, e = item[1], item[2]
        if e - s <= task_max or n_tasks >= cap - 2:
            tasks_i[n_tasks] = stack[0][sp]
            tasks_f[n_tasks] = item_f
            n_tasks += 1
            continue
        binned = e - s >= PAR_BIN_MIN
        if binned:
            bin_scale(item_f, cnt.shape[1], cmin, scale)
            bin_parallel(box, s, e, cmin, scale, cnt, bins, threads)
        pushed = _step(box, ids, item, leaf_size, work, binned, tree, stack, sp, n_nodes)
        n_nodes += pushed - sp
        sp = pushed
    return n_nodes, tasks_i[:n_tasks], tasks_f[:n_tasks]


@njit(parallel=True)
def _build_tasks(box, ids, tasks_i, tasks_f, leaf_size, tree, base, threads):
    """Build every subtree task; tasks are dealt to threads largest-first (LPT) by size."""
    n_tasks = tasks_i.shape[0]
    threads = max(1, min(threads, n_tasks))
    sizes = tasks_i[:, 2] - tasks_i[:, 1]
    by_size = np.argsort(-sizes)
    owner = np.empty(n_tasks, np.int64)
    load = np.zeros(threads, np.int64)
    for r in range(n_tasks):
        t = by_size[r]
        w = np.argmin(load)
        owner[t] = w
        load[w] += sizes[t]
    depths = np.zeros(n_tasks, np.int64)
    for w in nb.prange(threads):
        for t in range(n_tasks):
            if owner[t] != w:
                continue
            depths[t] = _build_subtree(box, ids, tasks_i[t], tasks_f[t], leaf_size, tree,
                                       base + 2 * tasks_i[t, 1])
    return depths.max() if n_tasks else 0


#: The builder's compiled modules: what a first build on a machine compiles
BUILDER_MODULES = tuple(Path(__file__).with_name(f"{name}.py")
                        for name in ("build", "sah", "collapse", "cost"))


@functools.cache
def _say_if_compiling() -> bool:
    """Log (``raytracer.mesh.bvh.build``, INFO) once per process that this build compiles the
    builder first, where numba has not cached it on this machine; whether it does."""
    if all(compiled_before(path) for path in BUILDER_MODULES):
        return False
    log.info("compiling the BVH builder with numba before the first build: about half a "
             "minute on 2 cores, once per machine (later runs load it from the cache)")
    return True


def compile_task_phase_and_finish(triangles: int = 512, leaf_size: int = 4) -> None:
    """Compile (into numba's cache) what a build runs after its top phase: the parallel task
    phase and the collapse to 8 wide, on a small random mesh whose arrays have the types a
    build passes. What the helper process of a first build does (:func:`_compile_ahead`)."""
    rng = np.random.default_rng(0)
    tris = rng.random((triangles, 3, 3)).astype(np.float32)
    box, ids = np.empty((triangles, 8), np.float32), np.empty(triangles, np.int32)
    slots = 2 * triangles + 2
    tree = (np.empty((slots, 8), np.float32), np.zeros(slots, np.int32),
            np.zeros(slots, np.int32))
    # no tasks: compiled all the same (numba compiles for the types, not the data)
    _build_tasks(box, ids, np.empty((0, 4), np.int64), np.empty((0, ITEM_F), np.float32),
                 int(leaf_size), tree, 0, nb.get_num_threads())
    # the top phase's first pass, which the main process compiles first: cached by now
    root_i, root_f = _root_item(_prepare(tris, nb.get_num_threads(), box, ids), triangles)
    _build_subtree(box, ids, root_i, root_f, int(leaf_size), tree, 1)
    finish_bvh(tris, *tree, ids, int(leaf_size), time.perf_counter())


def _compile_ahead() -> subprocess.Popen | None:
    """On a first build with a core to spare: a helper process that compiles the task phase
    and the collapse (:func:`compile_task_phase_and_finish`) while this one compiles the top
    phase (numba compiles on one core; the dragon's first build on 2 cores: 37 s of compiling
    in one process); None where no core is spare or the helper cannot start."""
    if len(os.sched_getaffinity(0)) < 2:
        return None
    try:
        return subprocess.Popen([sys.executable, "-m", "raytracer.mesh.bvh.compile_helper"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    except OSError as exc:  # the build compiles alone
        log.debug("no compile helper: %s", exc)
        return None


def _join(helper: subprocess.Popen | None) -> None:
    """Wait for the helper (what it compiled is then loaded from the cache, and what it did
    not, this process compiles); end it if it outlives its use."""
    if helper is None:
        return
    try:
        helper.wait(timeout=300)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait()


def build_bvh(triangles: np.ndarray, leaf_size: int = 4) -> BVH:
    """Build a binned-SAH BVH over ``triangles`` (F,3,3); ``leaf_size`` caps SAH leaves."""
    tris = checked_triangles(triangles, leaf_size)
    helper = _compile_ahead() if _say_if_compiling() else None
    start = time.perf_counter()
    n = len(tris)
    threads = nb.get_num_threads()
    box, ids = np.empty((n, 8), np.float32), np.empty(n, np.int32)
    root_i, root_f = _root_item(_prepare(tris, threads, box, ids), n)
    task_max = max(n // (TASKS_PER_THREAD * threads), MIN_TASK_TRIS)
    # the top phase makes at most cap tasks, so at most 2 * cap - 1 nodes
    base = 2 * _task_cap(n, task_max)
    slots = base + 2 * n
    tree = (np.empty((slots, 8), np.float32), np.zeros(slots, np.int32),
            np.zeros(slots, np.int32))  # node boxes, first child or triangle, leaf counts
    try:
        _, tasks_i, tasks_f = _build_top(box, ids, root_i, root_f, int(leaf_size), task_max,
                                         tree, threads)
    finally:
        _join(helper)
    _build_tasks(box, ids, tasks_i, tasks_f, int(leaf_size), tree, base, threads)
    return finish_bvh(tris, *tree, ids, int(leaf_size), start)
