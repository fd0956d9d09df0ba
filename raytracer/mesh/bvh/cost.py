"""The SAH cost model both builders split by, and the cost of a finished binary tree.

The SAH counts leaf tests, not triangles: a kernel tests a leaf's up to ``leaf_size``
triangles at once, so a side of n triangles costs its area times ceil(n / leaf_size)
(Embree's block SAH) and every node of at most ``leaf_size`` triangles becomes a leaf.
Counting triangles made leaves of 1.9 triangles on the dragon, half-filled float4 tests under
twice the nodes.
"""

from __future__ import annotations

import numpy as np

from common.jit_cache import njit

TRAVERSAL_COST = 1.0
INTERSECT_COST = 1.0  # one leaf test: up to leaf_size triangles, tested at once


@njit()
def area(lo0, lo1, lo2, hi0, hi1, hi2):
    """Surface area of a box; 0 for an empty (inverted) box."""
    dx, dy, dz = hi0 - lo0, hi1 - lo1, hi2 - lo2
    if dx < 0.0 or dy < 0.0 or dz < 0.0:
        return 0.0
    return 2.0 * (dx * dy + dy * dz + dz * dx)


@njit()
def box_area(box, i):
    """:func:`area` of row ``i`` of a (N, 8) box array (``lo.xyz, -, hi.xyz, -``)."""
    return area(box[i, 0], box[i, 1], box[i, 2], box[i, 4], box[i, 5], box[i, 6])


@njit()
def leaf_tests(n, leaf_size):
    """Leaf tests that ``n`` triangles cost: the kernels test up to ``leaf_size`` at once, so
    the SAH counts blocks of ``leaf_size``, not triangles (Embree's block SAH)."""
    return (n + leaf_size - 1) // leaf_size


@njit()
def sides_cost(left_area, left_n, right_area, right_n, leaf_size):
    """A split's two sides as the SAH counts them (each side's area times its leaf tests);
    the split costs ``TRAVERSAL_COST`` plus this over the parent's area."""
    return (left_area * leaf_tests(left_n, leaf_size)
            + right_area * leaf_tests(right_n, leaf_size))


@njit()
def is_leaf(n, leaf_size, best_cost, parent_area):
    """Whether ``n`` triangles make a leaf: they fit one leaf's test, and that test costs no
    more than the best split (``best_cost``: its :func:`sides_cost`)."""
    split_cost = TRAVERSAL_COST + (best_cost / parent_area if parent_area > 0 else np.inf)
    return n <= leaf_size and split_cost >= INTERSECT_COST * leaf_tests(n, leaf_size)


@njit()
def binary_sah(node_box, node_first, node_count, order, leaf_size):
    """SAH cost of the binary tree (C_trav = C_isect = 1 per leaf test of up to ``leaf_size``
    triangles, normalised by the root's area); ``order``: its inner nodes."""
    root_area = box_area(node_box, 0)
    if root_area <= 0.0:
        root_area = 1.0
    if order.shape[0] == 0:  # the root is a leaf
        return INTERSECT_COST * leaf_tests(node_count[0], leaf_size)
    cost = 0.0
    for f in range(order.shape[0]):
        i = order[f]
        cost += TRAVERSAL_COST * box_area(node_box, i)
        for c in range(2):
            k = node_first[i] + c
            if node_count[k] > 0:
                cost += INTERSECT_COST * leaf_tests(node_count[k], leaf_size) * box_area(
                    node_box, k)
    return cost / root_area
