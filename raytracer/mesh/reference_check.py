"""The CPU reference of an OpenCL frame and the rule the OpenCL image must meet against it.

The reference is the tracer's numba twin (:func:`raytracer.mesh.cpu_render.render_cpu`): the same
tree walk and shading on the CPU. Float operations run in another order on a device (fused
multiply-adds, fast math), so a few edge pixels may differ by more than rounding; the rule
allows those only: under 0.5 % of pixels more than 3 levels off in any channel, and a mean
difference under half a level. Every device is held to it (tests, ``autotune bench gpu``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from raytracer.camera import Camera
from raytracer.mesh.cpu_render import render_cpu
from raytracer.mesh.tracer import RenderSettings, Tracer, packed_normals

LEVELS_OFF = 3  # a pixel differs when a channel is more than this many levels off
MAX_PIXELS_OFF = 0.005  # share of such pixels allowed
MAX_MEAN_DIFF = 0.5  # mean of each pixel's largest channel difference, in levels


@dataclass(frozen=True)
class ImageAgreement:
    """How an image compares with its reference, and whether it meets the rule."""

    pixels_off: float  # share of pixels more than LEVELS_OFF levels off in some channel
    mean_diff: float  # mean over pixels of the largest channel difference
    agrees: bool

    def to_dict(self) -> dict[str, float | bool]:
        return {"pixels_off": self.pixels_off, "mean_diff": self.mean_diff,
                "agrees": self.agrees, "rule": f"< {MAX_PIXELS_OFF:.1%} of pixels more than "
                f"{LEVELS_OFF} levels off, mean difference < {MAX_MEAN_DIFF}"}


def reference_render(tracer: Tracer, camera: Camera, width: int, height: int,
                     settings: RenderSettings, seed: int = 0
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The CPU twin's render of the frame ``tracer`` renders: (RGBA8 image, per-pixel
    counters, last inner node, primary triangle), as :func:`render_cpu` returns them. The
    twin traces each pixel's own AO rays: a filtered AO term is refused (ValueError)."""
    if settings.ao_filter and settings.ao_rays > 0:
        raise ValueError("the CPU reference renders each pixel's own AO rays: render the frame "
                         "with ao_filter=False (the filter is checked against "
                         "raytracer.mesh.cpu_render.filter_ao)")
    s, b = tracer.scene, tracer.bvh
    return render_cpu(b.nodes, b.node_ints, b.shadow_nodes, b.shadow_node_ints, b.triangles,
                      packed_normals(s, b), camera.basis(width, height), width, height, s.light,
                      np.float32(s.diagonal), settings.ao_rays, settings.ao_radius * s.diagonal,
                      settings.shadows, settings.phong, seed)


def image_agreement(image: np.ndarray, reference: np.ndarray) -> ImageAgreement:
    """Compare two uint8 images of one shape by the rule in the module docstring."""
    if image.shape != reference.shape:
        raise ValueError(f"images differ in shape: {image.shape} against {reference.shape}")
    diff = np.abs(image.astype(np.int16) - reference.astype(np.int16)).max(axis=2)
    off, mean = float((diff > LEVELS_OFF).mean()), float(diff.mean())
    return ImageAgreement(off, mean, off < MAX_PIXELS_OFF and mean < MAX_MEAN_DIFF)
