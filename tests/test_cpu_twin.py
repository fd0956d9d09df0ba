"""The CPU twin (traversal.py, cpu_render.py) walks the BVH exactly as the OpenCL kernels do.

The probe measures the workload the model prices with the twin, so the two must not drift
apart: per pixel, the inner nodes visited and the leaves tested in every phase, and the
triangle each primary ray hits, must agree. An edit to the kernels without the twin (or the
other way round) fails here. The image comparison lives in test_tracer.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from raytracer.device.launches import KernelLaunches, Launch
from raytracer.mesh.bvh import packed_normals
from raytracer.mesh.cpu_render import AO, PRIMARY, SHADOW, render_cpu
from raytracer.mesh.phases import PACKET_PHASES, RAY_PACKET
from raytracer.mesh.tracer import RenderSettings, Tracer

W, H = 64, 36
SETTINGS = RenderSettings(ao_rays=2.5, ao_radius=0.1, shadows=True, phong=True)
# Share of pixels that must agree exactly. Measured: 100 % of the counters on these scenes and
# >= 99.8 % of primary triangles (equal-distance ties between adjacent triangles differ under
# fast math); a changed traversal order, box test or ray moves most pixels.
COUNTERS_AGREE = 0.995
HITS_AGREE = 0.99


def _cpu(tracer, settings: RenderSettings, seed: int, basis=None,
         size: tuple[int, int] = (W, H)):
    s, b = tracer.scene, tracer.bvh
    width, height = size
    basis = s.camera.basis(width, height) if basis is None else basis
    _, counters, _, prim = render_cpu(b.nodes, b.node_ints, b.shadow_nodes, b.shadow_node_ints,
                                      b.triangles, packed_normals(s, b), basis, width, height,
                                      s.light, np.float32(s.diagonal),
                                      settings.ao_rays, settings.ao_radius * s.diagonal,
                                      settings.shadows, settings.phong, seed,
                                      *(tracer.launches[phase].packet == RAY_PACKET
                                        for phase in PACKET_PHASES))
    return counters, prim


def agreement(tracer, settings: RenderSettings, seed: int, basis=None,
              size: tuple[int, int] = (W, H)) -> dict[str, float]:
    """Per phase, the share of pixels whose (nodes, tests) counters are equal on both sides;
    "hits": the share whose primary ray hit the same triangle (or missed on both). The twin
    traces primary and shadow rays as ``tracer`` launches them (one per pixel, or in
    packets)."""
    frame = tracer.render(tracer.scene.camera, *size, settings, seed=seed)
    gpu_prim = tracer.hits()[..., 3].copy().view(np.int32)
    counters, prim = _cpu(tracer, settings, seed, basis, size)
    out = {"hits": float((gpu_prim == prim).mean())}
    for phase, index in (("primary", PRIMARY), ("shadow", SHADOW), ("ao", AO)):
        gpu = frame.counters[phase]
        out[phase] = float((gpu == counters[:, :, index, :]).all(axis=2).mean())
    return out


@pytest.mark.parametrize("name", ["dragon-small", "spheres", "bunny"])
def test_counters_and_hits_agree_per_pixel(tracers, name):
    tracer = tracers(name, counters=True)
    got = agreement(tracer, SETTINGS, seed=3)
    for phase in ("primary", "shadow", "ao"):
        assert got[phase] >= COUNTERS_AGREE, f"{name} {phase}: {got}"
    assert got["hits"] >= HITS_AGREE, f"{name}: {got}"


@pytest.mark.parametrize("name", ["dragon-small", "spheres", "bunny"])
@pytest.mark.parametrize("phases", [("primary",), ("shadow",), ("primary", "shadow")])
def test_packet_counters_and_hits_agree_per_pixel(tracers, name, phases):
    """Primary and shadow rays in packets (kernels/primary_packet.cl, shadow_packet.cl): the
    twin's packets visit the kernels' nodes and test their triangles (measured: 99.96-100 % of
    pixels, both CPU runtimes), at a size that leaves packets partly outside the image."""
    one_ray = tracers(name, counters=True)
    tracer = Tracer(one_ray.scene, one_ray.bvh, counters=True, launches=KernelLaunches(
        {phase: Launch(packet=RAY_PACKET) for phase in phases}))
    got = agreement(tracer, SETTINGS, seed=3, size=(W + 3, H + 1))
    for phase in ("primary", "shadow", "ao"):
        assert got[phase] >= COUNTERS_AGREE, f"{name} {phase}: {got}"
    assert got["hits"] >= HITS_AGREE, f"{name}: {got}"


def test_the_comparison_sees_a_small_difference(tracers):
    """A twin whose rays start a quarter pixel off (a small edit to ray generation) fails."""
    tracer = tracers("dragon-small", counters=True)
    eye, top_left, du, dv = tracer.scene.camera.basis(W, H)
    shifted = np.array([eye, top_left + 0.25 * du, du, dv])
    got = agreement(tracer, SETTINGS, seed=3, basis=shifted)
    assert got["primary"] < COUNTERS_AGREE and got["hits"] < HITS_AGREE, got
