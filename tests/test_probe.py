"""CPU probe: workload figures are sane, match the tracer's own counters, and handle empty views."""

from __future__ import annotations

import numpy as np
import pytest

from raytracer.camera import Camera
from raytracer.tracer import RenderSettings
from raytracer.tuning.probe import Probe, coherence


def test_workload_matches_full_resolution_counters(tracers):
    tracer = tracers("dragon-small", counters=True)
    scene = tracer.scene
    probe = Probe(scene, tracer.bvh, factor=2, ao_samples=2)
    w = probe.measure(scene.camera, 128, 72)
    frame = tracer.render(scene.camera, 128, 72, RenderSettings(2, 0.1, True, True))
    assert w.pixels == 128 * 72
    assert 0.05 < w.hit_fraction < 1.0
    # per-pixel means at half resolution are close to the full-resolution truth
    assert w.p_t == pytest.approx(frame.counters["primary"][..., 0].mean(), rel=0.1)
    assert w.p_i == pytest.approx(frame.counters["primary"][..., 1].mean(), rel=0.15)
    assert w.s_t == pytest.approx(frame.counters["shadow"][..., 0].mean(), rel=0.15)
    assert w.a_t == pytest.approx(frame.counters["ao"][..., 0].mean() / 2, rel=0.15)
    assert 0.0 <= w.m <= 1.0 and w.t_v > 0
    assert w.a_w * w.t_v == pytest.approx(w.a_i)


def test_empty_view_has_zero_work_but_primary_steps(scenes, tracers):
    tracer = tracers("dragon-small")
    scene = tracer.scene
    eye = np.asarray(scene.camera.eye)
    away = Camera(tuple(eye), tuple(eye + (eye - np.asarray(scene.camera.target))))
    w = Probe(scene, tracer.bvh).measure(away, 320, 180)
    assert w.hit_fraction == 0.0
    assert w.s_t == w.s_i == w.a_t == w.a_i == 0.0
    assert w.m == 0.0 and w.t_v == 0 and w.a_w == 0.0


def test_async_measure_equals_sync(tracers):
    tracer = tracers("dragon-small")
    probe = Probe(tracer.scene, tracer.bvh)
    try:
        future = probe.measure_async(tracer.scene.camera, 160, 90)
        assert future.result(timeout=60) == probe.measure(tracer.scene.camera, 160, 90)
    finally:
        probe.close()


def test_coherence_counts_shared_last_nodes():
    last = np.array([[1, 1, 2, 3], [1, 4, 5, 6]])
    hit = np.ones_like(last, bool)
    # tile 2x2 (left): nodes 1,1,1,4 -> 3 of 4 share; right: 2,3,5,6 -> none share
    assert coherence(last, hit, 2) == pytest.approx(3 / 8)
    assert coherence(last, np.zeros_like(hit), 2) == 0.0


def test_bad_probe_settings(tracers):
    t = tracers("dragon-small")
    with pytest.raises(ValueError, match="probe factor"):
        Probe(t.scene, t.bvh, factor=0)


def test_probe_resolution_has_a_floor(tracers):
    t = tracers("dragon-small")
    probe = Probe(t.scene, t.bvh, factor=8, min_pixels=160 * 90)
    assert probe.resolution(1280, 720) == (160, 90)
    assert probe.resolution(320, 180) == (160, 90)
    assert probe.resolution(100, 50) == (100, 50)


def test_warp_max_takes_the_slowest_lane():
    from raytracer.tuning.probe import warp_max

    v = np.array([[1, 5, 2, 2], [3, 1, 0, 7]], float)
    assert warp_max(v, (1, 2)).tolist() == [[5, 5, 2, 2], [3, 3, 7, 7]]
    assert warp_max(v, (2, 2)).tolist() == [[5, 5, 7, 7], [5, 5, 7, 7]]
    assert warp_max(v, (1, 1)).tolist() == v.tolist()


def test_divergence_raises_the_per_thread_counts(tracers):
    t = tracers("dragon-small")
    scalar = Probe(t.scene, t.bvh, simd_width=1).measure(t.scene.camera, 320, 180)
    simd = Probe(t.scene, t.bvh, simd_width=16).measure(t.scene.camera, 320, 180)
    assert simd.p_t >= scalar.p_t and simd.a_t > scalar.a_t
    assert simd.hit_fraction > scalar.hit_fraction  # silhouettes: groups with any hit
