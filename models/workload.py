"""Per-frame ray-tracing workload measured by the CPU probe: the inputs of the §4.3 model.

The model is that of Ganestam & Doggett, "Auto-tuning Interactive Ray Tracing using an
Analytical GPU Architecture Model" (§4.3).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import ArrayLike


@dataclass(frozen=True)
class Workload:
    """Mean per-pixel ray-tracing statistics of one view, scaled to the full frame.

    Every count is a mean over *all* pixels of the frame (pixels whose primary ray misses
    contribute zero to the shadow and AO counts), so ``count * pixels`` is the frame total.

    The paper's product ``a_w * t_v`` (AO triangle tests per AO ray; here leaf tests) is
    measured directly as ``a_i``; ``a_w`` is kept as the ratio ``a_i / t_v`` so the §4.3
    equations read as printed.
    """

    pixels: int  # pixels of the frame the workload describes (width * height)
    hit_fraction: float  # share of primary rays that hit geometry
    # per primary ray: BVH traversal steps (inner nodes visited) and leaf tests (a leaf: up to
    # 4 triangles at once); where primary rays run in packets, a packet's node steps and
    # triangle tests shared by its rays (it tests a leaf's triangles one after another)
    p_t: float
    p_i: float
    s_t: float  # traversal steps per shadow ray (zero where the primary ray missed)
    s_i: float  # leaf tests per shadow ray
    a_t: float  # traversal steps per AO ray (per AO sample, per pixel)
    a_i: float  # leaf tests per AO ray (per AO sample, per pixel)
    t_v: float  # visible triangles: distinct triangles hit by the probe's primary rays
    m: float  # coherence in [0, 1]: P(adjacent pixels' rays end in the same BVH leaf)
    # a_t and a_i are per ray of the slowest lane of each SIMD group over ``ao_probe_rays``
    # rays a pixel; the same counts as a plain mean over lanes (None: not measured). A group
    # runs as long as its slowest lane's sum over the pixel's rays, so with more rays a pixel
    # the excess of the slowest lane over the mean shrinks (see models.raytrace_cost)
    a_t_lane: float | None = None
    a_i_lane: float | None = None
    ao_probe_rays: int = 2

    @property
    def a_w(self) -> float:
        """AO intersection cost of §4.3, defined so that ``a_w * t_v == a_i``."""
        return self.a_i / self.t_v if self.t_v > 0 else 0.0

    def ao_per_ray(self, rays: ArrayLike) -> tuple[ArrayLike, ArrayLike]:
        """(steps, leaf tests) per AO ray of the slowest lane when a pixel traces ``rays`` AO
        rays: the lane mean plus the slowest lane's excess, which for a sum of independent
        rays shrinks as 1/sqrt(rays) (measured at ``ao_probe_rays``)."""
        if self.a_t_lane is None or self.a_i_lane is None:
            return self.a_t, self.a_i
        k = np.sqrt(self.ao_probe_rays / np.maximum(np.asarray(rays, np.float64), 1.0))
        return (self.a_t_lane + (self.a_t - self.a_t_lane) * k,
                self.a_i_lane + (self.a_i - self.a_i_lane) * k)

    def features(self) -> list[float]:
        """The measured counts as numbers (learned predictors' inputs): every field, the lane
        means taken as the group counts where they were not measured."""
        lane_t = self.a_t if self.a_t_lane is None else self.a_t_lane
        lane_i = self.a_i if self.a_i_lane is None else self.a_i_lane
        return [float(self.pixels), self.hit_fraction, self.p_t, self.p_i, self.s_t, self.s_i,
                self.a_t, self.a_i, self.t_v, self.m, lane_t, lane_i]

    def to_dict(self) -> dict[str, float]:
        return asdict(self)
