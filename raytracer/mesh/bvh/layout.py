"""The BVH's memory layout: what ``kernels/traverse.cl``, ``raytracer/mesh/traversal.py`` and
the CPU code read, the constants they share with the build, and the :class:`BVH` that holds it.

Flat layout: one node per 256 bytes = eight float8, the eight children's boxes stored
structure-of-arrays so that one float8 operation tests one slab of all eight children:

    float8 0: lo.x of children 0..7      float8 1: hi.x of children 0..7
    float8 2: lo.y                       float8 3: hi.y
    float8 4: lo.z                       float8 5: hi.z
    float8 6: index of children 0..7  (int32 bits)
    float8 7: count of children 0..7  (int32 bits)

As a (N, 64) float32 array: child c's ``lo`` on axis a is ``nodes[n, plane(a, False) + c]``
(= 16 a + c), its ``hi`` ``nodes[n, plane(a, True) + c]`` (= 16 a + 8 + c), its index
``node_ints[n, CHILD_INDEX + c]`` (48 + c), its count ``node_ints[n, CHILD_COUNT + c]``
(56 + c). ``count > 0``: the child is a leaf holding triangles
``index .. index + count - 1`` (at most ``leaf_size``: 4, the default, is the most the
kernels' one-float4 leaf test covers); ``count == 0``: the child
is node ``index``; ``count == -1``: an empty slot, whose box is inverted (lo = +1e20,
hi = -1e20) so the kernels' slab test, which takes each axis' near plane by the sign of the
ray direction, never hits it. Node 0 is the root; a node's inner children are numbered
consecutively, subtrees depth-first. Triangles are reordered to leaf order in slots of
``LEAF_LANES`` (4): each leaf's first triangle is at a multiple of 4, and the slots after its
count repeat that triangle with face id -1 (never reported: the kernels mask lanes past the
count). ``BVH.triangles`` holds one slot per row, 48 bytes: float4 v0 (w = original face id as
int32 bits), float4 edge1 = v1 - v0, float4 edge2 = v2 - v0 (Möller–Trumbore reads the edges
directly); the CPU code reads it. The kernels read ``BVH.leaf_blocks``, the same slots four at
a time structure-of-arrays: block ``first / 4`` is nine float4, v0.x v0.y v0.z e1.x e1.y e1.z
e2.x e2.y e2.z of its four slots, so a leaf's one-float4-per-lane test loads nine vectors
instead of gathering twelve into lanes (dragon and sibenik, one compute unit, 1280x720: AO
rays 4-7 % faster on both CPU runtimes, one-ray primary and shadow rays 4-9 %).
Shadow rays walk a copy of the nodes with each node's children in increasing box area
(:func:`raytracer.mesh.bvh.collapse.shadow_order`: the same tree, another slot order).
``BVHStats`` describes the binary tree (its SAH cost is what the two builders are compared
on) and the wide one (nodes, the traversal stack it needs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from common.jit_cache import njit

WIDTH = 8  # children per node
NODE_FLOATS = 8 * WIDTH  # one node: six planes, indices and counts, WIDTH lanes each
CHILD_INDEX = 6 * WIDTH  # first int32 of the children's indices in a node
CHILD_COUNT = 7 * WIDTH  # first int32 of the children's counts
EMPTY_BOX = 1e20  # empty slots: lo = +EMPTY_BOX, hi = -EMPTY_BOX (never hit)
KERNEL_STACK = 96  # traversal stack entries in kernels/traverse.cl and traversal.py
TRI_FLOATS = 12
LEAF_LANES = 4  # the kernels test a leaf's triangles in one float4, one per lane
MAX_LEAF_SIZE = LEAF_LANES
STACK = 256  # entries of the builders' and the collapse's work stacks


@njit()
def plane(axis: int, hi: bool) -> int:
    """First float of a node's ``lo`` (or ``hi``) plane of ``axis`` for its WIDTH children."""
    return 2 * WIDTH * axis + (WIDTH if hi else 0)


@dataclass(frozen=True)
class BVHStats:
    """Summary of a built hierarchy. ``inner_nodes``, ``leaves``, ``depth`` and ``sah_cost``
    (C_trav = 1, C_isect = 1 per leaf test, root area normalised) describe the binary SAH
    tree; ``wide_nodes`` the 8-wide nodes the kernels read and ``stack_entries`` the most
    traversal-stack entries a ray can need in it (at most ``KERNEL_STACK``)."""

    triangles: int
    inner_nodes: int
    leaves: int
    depth: int
    sah_cost: float
    mean_leaf_size: float
    build_seconds: float
    bytes: int
    wide_nodes: int = 0
    stack_entries: int = 0


@dataclass
class BVH:
    """Flattened 8-wide BVH plus reordered triangles (see the module docstring for bytes)."""

    nodes: np.ndarray  # (N, NODE_FLOATS) float32
    triangles: np.ndarray  # (S, 12) float32: one triangle slot per row, S = 4 x leaves
    face_ids: np.ndarray  # (S,) int32: original face index of each slot, -1 for padding
    stats: BVHStats
    shadow_nodes: np.ndarray  # the same nodes, children smallest box first (shadow_order)
    leaf_blocks: np.ndarray  # (S / 4, 9, 4) float32: the slots SoA, four per block (kernels)

    @property
    def node_ints(self) -> np.ndarray:
        """The same node memory read as int32 (child indices and counts)."""
        return self.nodes.view(np.int32)

    @property
    def shadow_node_ints(self) -> np.ndarray:
        """:attr:`shadow_nodes` read as int32."""
        return self.shadow_nodes.view(np.int32)
