"""BVH build: exact closest hits against brute force, OpenCL primary hits, stats, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from raytracer.mesh.bvh import (
    BVH,
    CHILD_COUNT,
    CHILD_INDEX,
    KERNEL_STACK,
    LEAF_LANES,
    NODE_FLOATS,
    WIDTH,
    build_bvh,
    build_bvh_full_sweep,
    plane,
    shadow_order,
)
from raytracer.mesh.traversal import brute_force, trace_rays

RAYS = 2000


def random_rays(lo: np.ndarray, hi: np.ndarray, n: int, seed: int) -> tuple[np.ndarray, ...]:
    """Seeded rays from around the box toward random points inside it (most of them hit)."""
    rng = np.random.default_rng(seed)
    ext = np.maximum(hi - lo, 1e-3)
    origins = lo + ext * rng.uniform(-0.3, 1.3, (n, 3))
    targets = lo + ext * rng.uniform(0.0, 1.0, (n, 3))
    dirs = targets - origins
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    tmax = np.full(n, np.inf, np.float32)
    return origins.astype(np.float32), dirs.astype(np.float32), tmax


def assert_exact(
    bvh: BVH, origins: np.ndarray, dirs: np.ndarray, tmax: np.ndarray, min_same: float = 0.99
) -> None:
    """BVH closest hits equal brute force: same prim and t, or (ties at shared edges and
    coplanar faces) a different prim at the same t within 1e-6 relative."""
    t, prim, _, _ = trace_rays(bvh.nodes, bvh.node_ints, bvh.triangles, origins, dirs, tmax, False)
    t_ref, prim_ref = brute_force(bvh.triangles, origins, dirs, tmax)
    np.testing.assert_array_equal(prim >= 0, prim_ref >= 0)
    hit = prim_ref >= 0
    np.testing.assert_allclose(t[hit], t_ref[hit], rtol=1e-6)
    same = prim == prim_ref
    assert same.mean() >= min_same
    differ = ~same
    assert np.all(np.abs(t[differ] - t_ref[differ]) <= 1e-6 * np.abs(t_ref[differ]))


def tiny_mesh(n: int) -> np.ndarray:
    """n small triangles scattered (and overlapping) in the unit cube, seeded."""
    rng = np.random.default_rng(n)
    base = rng.uniform(0.0, 1.0, (n, 1, 3))
    return (base + rng.uniform(-0.3, 0.3, (n, 3, 3))).astype(np.float32)


@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("leaf_size", [1, 2, 4])
def test_tiny_meshes_exact(n: int, leaf_size: int) -> None:
    tris = tiny_mesh(n)
    bvh = build_bvh(tris, leaf_size)
    if n == 1 or n <= leaf_size:
        assert bvh.stats.leaves >= 1
    assert bvh.stats.inner_nodes + bvh.stats.leaves >= 1
    lo, hi = tris.reshape(-1, 3).min(axis=0), tris.reshape(-1, 3).max(axis=0)
    origins, dirs, tmax = random_rays(lo, hi, RAYS, seed=n)
    assert_exact(bvh, origins, dirs, tmax)
    t_ref, prim_ref = brute_force(bvh.triangles, origins, dirs, tmax)
    assert (prim_ref >= 0).mean() > 0.05  # the rays do exercise the triangles


def test_root_is_leaf_layout() -> None:
    bvh = build_bvh(tiny_mesh(1), leaf_size=4)
    assert bvh.nodes.shape == (1, NODE_FLOATS) == (1, 64)
    assert bvh.stats.inner_nodes == 0 and bvh.stats.leaves == 1 and bvh.stats.depth == 0
    ints = bvh.node_ints
    assert ints[0, CHILD_INDEX] == 0 and ints[0, CHILD_COUNT] == 1  # child 0 is the one leaf
    assert (ints[0, CHILD_COUNT + 1:CHILD_COUNT + WIDTH] == -1).all()  # the others are empty
    for a in range(3):  # empty slots have inverted boxes
        assert (bvh.nodes[0, plane(a, False) + 1:plane(a, False) + WIDTH] == 1e20).all()
        assert (bvh.nodes[0, plane(a, True) + 1:plane(a, True) + WIDTH] == -1e20).all()


def wide_children(bvh: BVH) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every used child slot: (node, index, count) arrays (count 0 = inner, > 0 = leaf)."""
    ints = bvh.node_ints
    node, slot = np.nonzero(ints[:, CHILD_COUNT:CHILD_COUNT + WIDTH] >= 0)
    return node, ints[node, CHILD_INDEX + slot], ints[node, CHILD_COUNT + slot]


def test_wide_layout_is_a_tree_over_all_triangles(scenes) -> None:
    """Every wide node but the root is some node's child exactly once, children lie inside
    their parent's box, and the leaves cover every triangle exactly once, each leaf from a
    slot that starts a leaf block, the slots past its count padding."""
    bvh = build_bvh(scenes("dragon-small").triangles(), leaf_size=4)
    node, index, count = wide_children(bvh)
    inner = count == 0
    assert sorted(index[inner].tolist()) == list(range(1, len(bvh.nodes)))
    assert (index[inner] > node[inner]).all()  # children after parents (depth-first)
    leaf_first, leaf_count = index[~inner], count[~inner]
    assert (leaf_first % LEAF_LANES == 0).all() and leaf_count.max() <= LEAF_LANES
    assert sorted(leaf_first.tolist()) == list(range(0, len(bvh.face_ids), LEAF_LANES))
    used = np.zeros(len(bvh.face_ids), bool)
    for first, n in zip(leaf_first, leaf_count, strict=True):
        used[first:first + n] = True
    assert sorted(bvh.face_ids[used].tolist()) == list(range(bvh.stats.triangles))
    assert (bvh.face_ids[~used] == -1).all()
    assert bvh.stats.wide_nodes == len(bvh.nodes) <= bvh.stats.inner_nodes
    assert bvh.stats.stack_entries <= KERNEL_STACK
    # a child's box lies inside the union of its parent's child boxes
    for n in range(1, min(len(bvh.nodes), 200)):
        parent = node[inner][index[inner] == n][0]
        p_ints = bvh.node_ints[parent]
        slot = np.nonzero((p_ints[CHILD_INDEX:CHILD_INDEX + WIDTH] == n)
                          & (p_ints[CHILD_COUNT:CHILD_COUNT + WIDTH] == 0))[0][0]
        used = bvh.node_ints[n, CHILD_COUNT:CHILD_COUNT + WIDTH] >= 0
        for a in range(3):
            lo, hi = plane(a, False), plane(a, True)
            p_lo, p_hi = bvh.nodes[parent, lo + slot], bvh.nodes[parent, hi + slot]
            assert (bvh.nodes[n, lo:lo + WIDTH][used] >= p_lo).all()
            assert (bvh.nodes[n, hi:hi + WIDTH][used] <= p_hi).all()


def test_shadow_tree_holds_each_nodes_children_smallest_box_first(scenes) -> None:
    """The shadow rays' tree is the same tree: each node's (box, index, count) children in
    increasing box area, empty slots last; and any-hit rays find an occluder in it exactly
    when they find one in the build's order."""
    scene = scenes("city")
    bvh = build_bvh(scene.triangles(), leaf_size=4)
    assert bvh.shadow_nodes.shape == bvh.nodes.shape
    ints = bvh.shadow_node_ints
    for n in range(len(bvh.nodes)):
        columns = [tuple(bvh.nodes[n, r * WIDTH + c] for r in range(6))
                   + tuple(bvh.node_ints[n, CHILD_INDEX + c:CHILD_COUNT + c + 1:WIDTH])
                   for c in range(WIDTH)]
        moved = [tuple(bvh.shadow_nodes[n, r * WIDTH + c] for r in range(6))
                 + tuple(ints[n, CHILD_INDEX + c:CHILD_COUNT + c + 1:WIDTH]) for c in range(WIDTH)]
        assert sorted(columns) == sorted(moved)
        used = ints[n, CHILD_COUNT:CHILD_COUNT + WIDTH] >= 0
        assert not (~used[:-1] & used[1:]).any()  # empty slots last
        ext = np.array([bvh.shadow_nodes[n, plane(a, True):plane(a, True) + WIDTH]
                        - bvh.shadow_nodes[n, plane(a, False):plane(a, False) + WIDTH]
                        for a in range(3)])[:, used].astype(np.float64)
        area = ext[0] * ext[1] + ext[1] * ext[2] + ext[0] * ext[2]
        assert (np.diff(area) >= 0).all()
    np.testing.assert_array_equal(shadow_order(bvh.shadow_nodes), bvh.shadow_nodes)
    origins, dirs, _ = random_rays(*scene.bounds, RAYS, seed=3)
    tmax = np.full(RAYS, 0.3 * scene.diagonal, np.float32)
    _, prim, _, _ = trace_rays(bvh.nodes, bvh.node_ints, bvh.triangles, origins, dirs, tmax, True)
    _, shadow_prim, _, _ = trace_rays(bvh.shadow_nodes, ints, bvh.triangles, origins, dirs, tmax,
                                      True)
    np.testing.assert_array_equal(prim >= 0, shadow_prim >= 0)
    assert (prim >= 0).any() and (prim < 0).any()


@pytest.mark.parametrize("name", ["dragon-small", "city", "spheres", "bunny"])
def test_scenes_exact(scenes, name: str) -> None:
    scene = scenes(name)
    bvh = build_bvh(scene.triangles(), leaf_size=4)
    origins, dirs, tmax = random_rays(*scene.bounds, RAYS, seed=7)
    assert_exact(bvh, origins, dirs, tmax)
    # finite tmax: hits beyond it are not reported
    short = np.full(RAYS, 0.3 * scene.diagonal, np.float32)
    assert_exact(bvh, origins, dirs, short)


@pytest.mark.parametrize("leaf_size", [1, 2, 4])
def test_leaf_sizes_exact_and_stats(scenes, leaf_size: int) -> None:
    scene = scenes("dragon-small")
    bvh = build_bvh(scene.triangles(), leaf_size=leaf_size)
    s = bvh.stats
    assert s.triangles == scene.triangle_count
    assert s.leaves == s.inner_nodes + 1  # a full binary tree
    assert len(bvh.nodes) == s.wide_nodes and s.inner_nodes / 7 <= s.wide_nodes <= s.inner_nodes
    assert s.depth >= 10 and s.stack_entries <= KERNEL_STACK  # what the kernels' stack holds
    assert s.sah_cost > 0 and s.build_seconds > 0
    assert 1.0 <= s.mean_leaf_size <= leaf_size
    assert s.bytes == bvh.nodes.nbytes + bvh.shadow_nodes.nbytes + bvh.leaf_blocks.nbytes
    faces = bvh.face_ids[bvh.face_ids >= 0]
    assert sorted(faces.tolist()) == list(range(s.triangles))  # a permutation, padding apart
    assert wide_children(bvh)[2].max() <= leaf_size
    origins, dirs, tmax = random_rays(*scene.bounds, RAYS, seed=leaf_size)
    assert_exact(bvh, origins, dirs, tmax)


@pytest.mark.parametrize("leaf_size", [2, 4])
def test_no_inner_node_fits_one_leaf_test(scenes, leaf_size: int) -> None:
    """A node of at most ``leaf_size`` triangles is a leaf (a split of it never costs less
    than its one leaf test, so the build does not weigh one): every inner child holds more."""
    bvh = build_bvh(scenes("dragon-small").triangles(), leaf_size=leaf_size)
    node, index, count = wide_children(bvh)
    below = np.zeros(len(bvh.nodes), np.int64)  # triangles under each wide node
    for k in np.argsort(-node, kind="stable"):  # children (later nodes) before parents
        below[node[k]] += count[k] if count[k] > 0 else below[index[k]]
    assert below[0] == bvh.stats.triangles
    assert (below[index[count == 0]] > leaf_size).all()


def test_leaves_fill_the_kernels_leaf_test(scenes) -> None:
    """The SAH counts leaf tests (up to four triangles each), so leaves come nearly full: a
    triangle-counting SAH left the dragon's at 1.9 triangles, half-empty float4 tests."""
    s = build_bvh(scenes("dragon-small").triangles(), leaf_size=4).stats
    assert s.mean_leaf_size > 3.5


def test_packed_triangles_match_input(scenes) -> None:
    """Each slot holds its face's corner and edges (a padding slot: its block's first), and
    the kernels' leaf blocks hold the same floats four slots to a float4."""
    tris = scenes("dragon-small").triangles()
    bvh = build_bvh(tris)
    packed = bvh.triangles
    first = np.repeat(bvh.face_ids[::LEAF_LANES], LEAF_LANES)
    src = tris[np.where(bvh.face_ids >= 0, bvh.face_ids, first)]
    np.testing.assert_array_equal(packed[:, 0:3], src[:, 0])
    np.testing.assert_array_equal(packed[:, 4:7], src[:, 1] - src[:, 0])
    np.testing.assert_array_equal(packed[:, 8:11], src[:, 2] - src[:, 0])
    np.testing.assert_array_equal(packed[:, 3].view(np.int32), bvh.face_ids)
    blocks = bvh.leaf_blocks
    assert blocks.shape == (len(packed) // LEAF_LANES, 9, LEAF_LANES)
    for row, column in enumerate((0, 1, 2, 4, 5, 6, 8, 9, 10)):
        np.testing.assert_array_equal(blocks[:, row, :].ravel(), packed[:, column])


def test_binned_sah_close_to_full_sweep(scenes) -> None:
    tris = scenes("dragon-small").triangles()
    binned = build_bvh(tris).stats.sah_cost
    full = build_bvh_full_sweep(tris).stats.sah_cost
    assert full > 0 and binned <= 1.10 * full


def test_full_sweep_exact(scenes) -> None:
    scene = scenes("city")
    bvh = build_bvh_full_sweep(scene.triangles(), leaf_size=4)
    origins, dirs, tmax = random_rays(*scene.bounds, RAYS, seed=3)
    assert_exact(bvh, origins, dirs, tmax)


def test_coincident_centroids() -> None:
    """Many identical triangles: no SAH split separates them; the build halves the range.
    Every hit is a 100-way tie, so only t (and hit or miss) must match, not the prim."""
    tris = np.repeat(tiny_mesh(1), 100, axis=0)
    bvh = build_bvh(tris, leaf_size=4)
    assert bvh.stats.leaves >= 25 and bvh.node_ints[:, CHILD_COUNT:].max() <= 4
    origins, dirs, tmax = random_rays(tris[0].min(axis=0), tris[0].max(axis=0), 500, seed=1)
    assert_exact(bvh, origins, dirs, tmax, min_same=0.0)


@pytest.mark.parametrize("leaf_size", [0, -1, 5, 8, 2.5, True, "4"])
def test_bad_leaf_size(leaf_size) -> None:
    with pytest.raises(ValueError, match="leaf_size"):
        build_bvh(tiny_mesh(5), leaf_size=leaf_size)


@pytest.mark.parametrize(
    "tris",
    [
        np.zeros((0, 3, 3), np.float32),
        np.zeros((4, 3), np.float32),
        np.zeros((4, 3, 2), np.float32),
        np.zeros((2, 4, 3), np.float32),
        np.array([[[0, 0, 0], [1, 0, 0], [0, np.nan, 0]]], np.float32),
        np.array([[[0, 0, 0], [1, 0, 0], [0, np.inf, 0]]], np.float32),
        [["a", "b", "c"]],
    ],
)
def test_bad_triangles(tris) -> None:
    with pytest.raises(ValueError, match="triangles"):
        build_bvh(tris)
    with pytest.raises(ValueError, match="triangles"):
        build_bvh_full_sweep(tris)


def test_opencl_primary_hits_match_brute_force(scenes, tracers) -> None:
    """The kernel's primary hits against brute force on the same rays.

    The kernel runs with -cl-fast-relaxed-math (FMA contraction, approximate reciprocal and
    normalize differ in the last bits from numpy), so a ray through the edge two triangles
    share hits both at the same t to an ulp or two, and which one is "closest" is decided by
    rounding. dragon-small at 160x120 has many tiny triangles per pixel, so ~0.1 % of the
    pixels are such ties (measured: 23 of 19200, all between neighbours in one leaf, no hit
    or miss flip). We check that every disagreement is such a tie (the kernel's triangle,
    re-tested on the CPU, is hit at the reference t within 1e-5 relative), that ties stay
    under 1 %, and that anything else (a hit/miss flip or a different depth) stays < 0.1 %.
    """
    scene = scenes("dragon-small")
    tracer = tracers("dragon-small")
    width, height = 160, 120
    tracer.render(scene.camera, width, height)
    hits = tracer.hits().reshape(-1, 4)
    prim = hits[:, 3].copy().view(np.int32)
    t = hits[:, 0]
    eye, top_left, du, dv = scene.camera.basis(width, height)
    ys, xs = np.mgrid[0:height, 0:width]
    dirs = (
        top_left
        + (xs.reshape(-1, 1) + np.float32(0.5)) * du
        + (ys.reshape(-1, 1) + np.float32(0.5)) * dv
    ).astype(np.float32)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    origins = np.broadcast_to(eye, dirs.shape).astype(np.float32)
    tmax = np.full(len(dirs), np.inf, np.float32)
    t_ref, prim_ref = brute_force(tracer.bvh.triangles, origins, dirs, tmax)
    assert (prim_ref >= 0).mean() > 0.1
    differ = np.flatnonzero(prim != prim_ref)
    tie = np.zeros(len(differ), bool)
    for j, i in enumerate(differ):
        if prim[i] < 0 or prim_ref[i] < 0:
            continue
        tris = tracer.bvh.triangles[prim[i] : prim[i] + 1]
        t_own, _ = brute_force(tris, origins[i : i + 1], dirs[i : i + 1], tmax[i : i + 1])
        tie[j] = abs(t_own[0] - t_ref[i]) <= 1e-5 * t_ref[i]
    assert tie.sum() < 0.01 * len(prim)
    assert (~tie).sum() < 0.001 * len(prim)
    same_hit = (prim == prim_ref) & (prim >= 0)
    np.testing.assert_allclose(t[same_hit], t_ref[same_hit], rtol=1e-4)


def test_a_build_that_compiles_the_builder_says_so_first(monkeypatch, tmp_path, caplog):
    """Where numba has no cached builder (an empty cache folder here), the first build of the
    process logs, before it starts, that it compiles first; with the cache in place it says
    nothing."""
    import logging

    from common import jit_cache
    from raytracer.mesh.bvh import build

    tris = np.random.default_rng(0).random((64, 3, 3)).astype(np.float32)
    monkeypatch.setattr(jit_cache, "cache_root", lambda: tmp_path)
    build._say_if_compiling.cache_clear()
    with caplog.at_level(logging.INFO, logger="raytracer"):
        build_bvh(tris)
    assert any("compiling the BVH builder" in r.getMessage() for r in caplog.records)
    monkeypatch.undo()
    caplog.clear()
    build._say_if_compiling.cache_clear()
    with caplog.at_level(logging.INFO, logger="raytracer"):
        build_bvh(tris)  # the suite's builds have cached the builder
    assert not any("compiling" in r.getMessage() for r in caplog.records)


def test_first_build_helper_compiles_what_a_build_runs(monkeypatch) -> None:
    """A first build's helper process compiles the task phase and the collapse into numba's
    cache; the build then loads them only if the helper passed the very types a build passes
    (numba keys a compiled function on them): the same array dtypes, dimensions and layouts."""
    import numba

    import raytracer.mesh.bvh.build as build

    seen: dict[str, list] = {"tasks": [], "finish": []}
    tasks, finish = build._build_tasks, build.finish_bvh

    def recorded(key, fn):
        def call(*args):
            seen[key].append(tuple(numba.typeof(a) for a in args))
            return fn(*args)
        return call

    monkeypatch.setattr(build, "_build_tasks", recorded("tasks", tasks))
    monkeypatch.setattr(build, "finish_bvh", recorded("finish", finish))
    rng = np.random.default_rng(3)
    build.build_bvh(rng.random((20000, 3, 3)).astype(np.float32))
    build.compile_task_phase_and_finish(triangles=64)
    assert len(seen["tasks"]) == len(seen["finish"]) == 2
    assert seen["tasks"][0] == seen["tasks"][1]
    assert seen["finish"][0] == seen["finish"][1]
