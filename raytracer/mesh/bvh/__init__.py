"""Binned-SAH bounding volume hierarchy built with numba, collapsed to an 8-wide BVH for the
OpenCL kernels.

A binary SAH tree is built first (:mod:`~raytracer.mesh.bvh.build`: the parallel top phase and the
subtrees below it, each node split by :mod:`~raytracer.mesh.bvh.sah` under the block-SAH cost model
of :mod:`~raytracer.mesh.bvh.cost`), then collapsed to 8-wide nodes, its leaves given slots of four
triangles and packed (:mod:`~raytracer.mesh.bvh.collapse`) into the flat layout the kernels and the
CPU code read (:mod:`~raytracer.mesh.bvh.layout`, documented byte for byte there).
:func:`build_bvh_full_sweep` (:mod:`~raytracer.mesh.bvh.reference`) is the exact sort-and-sweep
reference with the same leaf policy and collapse; :func:`packed_normals`
(:mod:`~raytracer.mesh.bvh.normals`) lays out the scene's normals in the BVH's slot order.
Re-exported here (``import X as X``): what other modules and the tests use; the build's
tuning constants stay in their modules.
"""

from __future__ import annotations

from raytracer.mesh.bvh.build import build_bvh as build_bvh
from raytracer.mesh.bvh.collapse import shadow_order as shadow_order
from raytracer.mesh.bvh.layout import BVH as BVH
from raytracer.mesh.bvh.layout import CHILD_COUNT as CHILD_COUNT
from raytracer.mesh.bvh.layout import CHILD_INDEX as CHILD_INDEX
from raytracer.mesh.bvh.layout import KERNEL_STACK as KERNEL_STACK
from raytracer.mesh.bvh.layout import LEAF_LANES as LEAF_LANES
from raytracer.mesh.bvh.layout import NODE_FLOATS as NODE_FLOATS
from raytracer.mesh.bvh.layout import WIDTH as WIDTH
from raytracer.mesh.bvh.layout import BVHStats as BVHStats
from raytracer.mesh.bvh.layout import plane as plane
from raytracer.mesh.bvh.normals import packed_normals as packed_normals
from raytracer.mesh.bvh.reference import build_bvh_full_sweep as build_bvh_full_sweep
