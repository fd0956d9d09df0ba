"""OpenCL tracer: images match the CPU reference, phases are timed, bad input is refused."""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pytest

import raytracer.mesh.tracer as tracer_mod
from raytracer.camera import Camera
from raytracer.device.choice import DeviceError, choose_device
from raytracer.mesh.reference_check import image_agreement, reference_render
from raytracer.mesh.scene import SCENES
from raytracer.mesh.tracer import RenderSettings, Tracer, TracerError

W, H = 96, 54


def reference(tracer: Tracer, settings: RenderSettings, seed: int):
    return reference_render(tracer, tracer.scene.camera, W, H, settings, seed)


@pytest.mark.parametrize("name", sorted(SCENES))
def test_image_matches_cpu_reference(tracers, name):
    tracer = tracers(name)
    # the CPU reference renders one frame: no AO history from the frames before
    settings = RenderSettings(ao_rays=4, ao_radius=0.1, shadows=True, phong=True,
                              ao_history=False, ao_filter=False)
    frame = tracer.render(tracer.scene.camera, W, H, settings, seed=5)
    agreement = image_agreement(frame.image, reference(tracer, settings, 5)[0])
    assert frame.image.shape == (H, W, 4) and frame.image.dtype == np.uint8
    # float op order differs (fused multiply-add, fast math): allow rare edge pixels only
    assert agreement.agrees, agreement
    assert frame.image[..., :3].std() > 5  # not a blank image


@pytest.mark.parametrize("settings", [RenderSettings(0, 0.1, False, False, False, False),
                                      RenderSettings(2, 0.05, False, True, False, False),
                                      RenderSettings(2.4, 0.1, True, True, False, False),
                                      RenderSettings(3, 0.2, True, False, False, False)])
def test_knob_combinations_match_reference(tracers, settings):
    tracer = tracers("spheres")
    frame = tracer.render(tracer.scene.camera, W, H, settings, seed=1)
    assert image_agreement(frame.image, reference(tracer, settings, 1)[0]).agrees


def test_phases_timed_only_when_enabled(tracers):
    tracer = tracers("dragon-small")
    f = tracer.render(tracer.scene.camera, W, H, RenderSettings(0, 0.1, False, True))
    assert set(f.phase_seconds) == {"primary", "shade"}
    f = tracer.render(tracer.scene.camera, W, H, RenderSettings(2, 0.1, True, True))
    assert set(f.phase_seconds) == {"primary", "shadow", "ao", "shade"}
    assert all(s > 0 for s in f.phase_seconds.values())
    assert f.seconds == pytest.approx(sum(f.phase_seconds.values()))


def test_counters_match_cpu_twin(tracers):
    tracer = tracers("dragon-small", counters=True)
    settings = RenderSettings(2, 0.1, True, True, True, False)
    frame = tracer.render(tracer.scene.camera, W, H, settings, seed=2)
    _, counters, _, _ = reference(tracer, settings, 2)
    for i, phase in enumerate(("primary", "shadow", "ao")):
        gpu = frame.counters[phase].astype(np.float64).mean(axis=(0, 1))
        cpu = counters[:, :, i].astype(np.float64).mean(axis=(0, 1))
        assert gpu == pytest.approx(cpu, rel=0.01), phase


@pytest.mark.parametrize("packets", [False, True])
def test_kernels_without_traversal_trace_only_primary_rays(tracers, packets):
    """bench throughput's variant of the kernels: the shadow and AO rays are built but not
    traversed (no node step, no leaf test), the primary rays as in the real kernels; with
    the packet forms of the primary and shadow kernels too."""
    from benchmarks.renderers.throughput import without_traversal_source
    from raytracer.device.launches import KernelLaunches, Launch
    from raytracer.mesh.phases import PACKET_PHASES, RAY_PACKET

    real = tracers("dragon-small", counters=True)
    if packets:
        real = Tracer(real.scene, real.bvh, counters=True, launches=KernelLaunches(
            {phase: Launch(packet=RAY_PACKET) for phase in PACKET_PHASES}))
    untraced = Tracer(real.scene, real.bvh, counters=True, source=without_traversal_source(),
                      launches=real.launches)
    settings = RenderSettings(2, 0.1, True, True)
    a = real.render(real.scene.camera, W, H, settings, seed=2)
    b = untraced.render(real.scene.camera, W, H, settings, seed=2)
    np.testing.assert_array_equal(a.counters["primary"], b.counters["primary"])
    for phase in ("shadow", "ao"):
        assert a.counters[phase].sum() > 0 and b.counters[phase].sum() == 0, phase


def test_resize_between_frames(tracers):
    tracer = tracers("dragon-small")
    a = tracer.render(tracer.scene.camera, 40, 30)
    b = tracer.render(tracer.scene.camera, 33, 17)  # not a multiple of the 8x8 tile
    assert a.image.shape == (30, 40, 4) and b.image.shape == (17, 33, 4)


@pytest.mark.parametrize("w, h", [(0, 10), (10, -1), (100000, 100000), (1.5, 10)])
def test_bad_image_size(tracers, w, h):
    with pytest.raises(TracerError, match="image size"):
        tracers("dragon-small").render(tracers("dragon-small").scene.camera, w, h)


@pytest.mark.parametrize("rays", [-1, 65, float("nan"), float("inf")])
def test_ao_rays_out_of_range(tracers, rays):
    t = tracers("dragon-small")
    with pytest.raises(TracerError, match="ao_rays must be a number in 0..64"):
        t.render(t.scene.camera, 8, 8, RenderSettings(ao_rays=rays))


def test_bad_ao_radius(tracers):
    t = tracers("dragon-small")
    with pytest.raises(TracerError, match="ao_radius"):
        t.render(t.scene.camera, 8, 8, RenderSettings(ao_rays=1, ao_radius=float("nan")))


def test_no_opencl_platform_says_how_to_install(monkeypatch):
    def no_platforms():
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(cl, "get_platforms", no_platforms)
    with pytest.raises(DeviceError, match="pip install intel-opencl-rt"):
        choose_device()


def test_unknown_device_lists_available():
    with pytest.raises(DeviceError, match="no OpenCL device matches 'no-such-gpu'; available"):
        choose_device("no-such-gpu")


def test_device_from_environment(monkeypatch):
    info, _ = choose_device()
    monkeypatch.setenv("AUTOTUNE_DEVICE", f"{info.platform_index}:{info.device_index}")
    assert choose_device()[0] == info
    monkeypatch.setenv("AUTOTUNE_DEVICE", "no-such-gpu")
    with pytest.raises(DeviceError):
        choose_device()


def test_kernel_build_failure_shows_build_log(scenes, monkeypatch):
    monkeypatch.setattr(tracer_mod, "kernel_source", lambda: "__kernel void primary( { oops")
    with pytest.raises(TracerError, match="kernel build failed") as err:
        Tracer(scenes("dragon-small"))
    assert "oops" in str(err.value) or "error" in str(err.value).lower()


def test_fractional_ao_count_costs_between_its_neighbours(tracers):
    tracer = tracers("dragon-small", counters=True)
    cam = tracer.scene.camera
    ao = {}
    for rays in (2, 2.5, 3):
        frame = tracer.render(cam, W, H, RenderSettings(rays, 0.1, False, True))
        ao[rays] = frame.counters["ao"][..., 0].sum()
    assert ao[2] < ao[2.5] < ao[3]
    assert (ao[2.5] - ao[2]) / (ao[3] - ao[2]) == pytest.approx(0.5, abs=0.1)


def test_ao_history_starts_from_the_frame_s_own_rays_and_converges_on_a_still_view(tracers):
    tracer = tracers("dragon-small")
    cam = tracer.scene.camera
    reference_image = tracer.render(cam, W, H,
                                    RenderSettings(64, 0.1, False, False, False, False))
    ref = reference_image.image[..., :3].astype(np.float64)

    def error(settings: RenderSettings, seed: int) -> float:
        image = tracer.render(cam, W, H, settings, seed=seed).image[..., :3]
        return float(np.abs(image.astype(np.float64) - ref).mean())

    on = RenderSettings(1, 0.1, False, False, True, False)
    off = RenderSettings(1, 0.1, False, False, False, False)
    for seed in range(4):  # a history to forget
        tracer.render(cam, W, H, on, seed=seed)
    tracer.forget_history()
    first = tracer.render(cam, W, H, on, seed=3).image
    assert np.array_equal(first, tracer.render(cam, W, H, off, seed=3).image)
    tracer.forget_history()
    kept = [error(on, seed) for seed in range(10)]
    alone = [error(off, seed) for seed in range(10)]
    # a still view gathers about ten frames' rays: the error against 64 rays falls 4-5x
    assert kept[-1] < 0.35 * kept[0]
    assert min(alone) > 0.7 * alone[0]


def test_ao_filter_matches_its_numpy_twin_pixel_by_pixel(tracers):
    """The filtered AO term is the NumPy twin's filter of the same frame's own rays (2 a
    pixel, so every hit pixel traced the same count): a few pixels may flip where a
    neighbour's distance from the tangent plane rounds across the bound."""
    from raytracer.mesh.bvh import packed_normals
    from raytracer.mesh.cpu_render import filter_ao

    tracer = tracers("sibenik")
    cam = tracer.scene.camera
    own = RenderSettings(2, 0.1, False, False, False, False)
    tracer.render(cam, W, H, own, seed=7)
    open_share, hits = tracer.ao_term(), tracer.hits()
    tracer.render(cam, W, H, RenderSettings(2, 0.1, False, False, False, True), seed=7)
    filtered = tracer.ao_term()
    prim = hits[..., 3].view(np.int32)
    basis = cam.basis(W, H)
    ys, xs = np.mgrid[0:H, 0:W]
    ray = basis[1] + (xs[..., None] + 0.5) * basis[2] + (ys[..., None] + 0.5) * basis[3]
    normal = packed_normals(tracer.scene, tracer.bvh)[np.maximum(prim, 0)][..., 3::4][..., :3]
    normal = np.where(((normal * ray).sum(-1) > 0)[..., None], -normal, normal)
    depth = np.where(prim >= 0, hits[..., 0], -1.0)
    twin = filter_ao(open_share, np.where(prim >= 0, 2.0, 0.0), depth, normal, basis,
                     tracer_mod.AO_FILTER_REACH)
    hit = prim >= 0
    assert hit.mean() > 0.5 and not np.array_equal(filtered[hit], open_share[hit])
    assert (np.abs(filtered - twin)[hit] > 1e-3).mean() < 0.005


def test_the_ao_filter_brings_few_rays_closer_to_many(tracers):
    """One AO ray a pixel, filtered, is nearer the 64-ray term than one ray alone is (each
    frame its own rays: no history), on a still view of an interior and of a mesh."""
    for name in ("sibenik", "dragon-small"):
        tracer = tracers(name)
        cam = tracer.scene.camera
        tracer.render(cam, W, H, RenderSettings(64, 0.1, False, False, False, False), seed=9)
        many = tracer.ao_term()
        errors = []
        for filtered in (False, True):
            tracer.render(cam, W, H, RenderSettings(1, 0.1, False, False, False, filtered),
                          seed=3)
            errors.append(float(np.abs(tracer.ao_term() - many).mean()))
        assert errors[1] < 0.6 * errors[0], (name, errors)


def test_ao_history_stays_with_the_surface_that_kept_it(tracers):
    """After a cut to the view from behind, nearly every pixel is what a fresh history gives:
    a surface seen for the first time takes no other's history."""
    tracer = tracers("dragon-small")
    cam = tracer.scene.camera
    eye, target = np.asarray(cam.eye), np.asarray(cam.target)
    behind = Camera(tuple(2 * target - eye), tuple(target), cam.up, cam.fov_y)
    settings = RenderSettings(1, 0.1, False, False)
    tracer.forget_history()
    for seed in range(8):
        tracer.render(cam, W, H, settings, seed=seed)
    after_cut = tracer.render(behind, W, H, settings, seed=99).image
    tracer.forget_history()
    fresh = tracer.render(behind, W, H, settings, seed=99).image
    assert np.all(after_cut == fresh, axis=-1).mean() > 0.9
