"""Binned-SAH bounding volume hierarchy built with numba, collapsed to an 8-wide BVH for the
OpenCL kernels.

A binary SAH tree is built first (:mod:`~raytracer.bvh.build`: the parallel top phase and the
subtrees below it, each node split by :mod:`~raytracer.bvh.sah` under the block-SAH cost model
of :mod:`~raytracer.bvh.cost`), then collapsed to 8-wide nodes, its leaves given slots of four
triangles and packed (:mod:`~raytracer.bvh.collapse`) into the flat layout the kernels and the
CPU code read (:mod:`~raytracer.bvh.layout`, documented byte for byte there).
:func:`build_bvh_full_sweep` (:mod:`~raytracer.bvh.reference`) is the exact sort-and-sweep
reference with the same leaf policy and collapse; :func:`packed_normals`
(:mod:`~raytracer.bvh.normals`) lays out the scene's normals in the BVH's slot order.
Re-exported here (``import X as X``): what other modules and the tests use; the build's
tuning constants stay in their modules.
"""

from __future__ import annotations

from raytracer.bvh.build import build_bvh as build_bvh
from raytracer.bvh.collapse import shadow_order as shadow_order
from raytracer.bvh.layout import BVH as BVH
from raytracer.bvh.layout import CHILD_COUNT as CHILD_COUNT
from raytracer.bvh.layout import CHILD_INDEX as CHILD_INDEX
from raytracer.bvh.layout import KERNEL_STACK as KERNEL_STACK
from raytracer.bvh.layout import LEAF_LANES as LEAF_LANES
from raytracer.bvh.layout import NODE_FLOATS as NODE_FLOATS
from raytracer.bvh.layout import WIDTH as WIDTH
from raytracer.bvh.layout import BVHStats as BVHStats
from raytracer.bvh.layout import plane as plane
from raytracer.bvh.normals import packed_normals as packed_normals
from raytracer.bvh.reference import build_bvh_full_sweep as build_bvh_full_sweep
